// Package tostr holds libfabric's fi_tostr(3) and fi_strerror(3)
// spellings by number: the names of capability, operation-flag, mode,
// ordering and MR-mode bits, of every enumeration of fi_getinfo(3), the
// error texts, the fi_info -v block writer and the name parsers.
//
// Tables are keyed by libfabric's numeric values, which the root package
// fi uses for its constants too; fi's String, ToStr, Strerror and Parse*
// functions hand over to this package, and its tests check that every
// constant prints its libfabric name. It imports only the standard
// library; only the root package imports it. This is an internal package
// of gofi: it carries no compatibility promise.
package tostr
