// Package link joins gofi's two transports under one endpoint: the
// shared-memory transport (package shm) for peers on this host and the
// tcp transport (package net) for the others. It is the data path of the
// "shm+tcp" provider.
//
// It owns:
//   - the linked address (name.go): an FI_ADDR_STR string
//     fi_link://host:port?shm=<region>&dom=<identity> carrying both
//     members' addresses and the identity of the shared-memory domain the
//     endpoint lives in (kernel boot, shm directory, user); the route a
//     peer takes (via=shm or via=tcp), decided when the name is inserted
//     into an address vector (Canon) and kept in the stored form;
//   - the linked transport (transport.go): one transport.Transport whose
//     peers are routed to one member each, so the engine above keeps one
//     posted-receive queue, one set of completions and one wait for both;
//     inbound work of both members reaches the engine through one sink;
//     Wait sleeps once, on the shm doorbell, which the tcp member rings
//     while the link sleeps.
//
// One-sided operations (RMA, atomics) go to the member that reaches the
// peer; the endpoint serves peers' requests on both members with one
// rma.Target (its key table a shared segment).
//
// The members stay unaware of each other. It imports only packages
// transport and rma and the two members (shm, net); the root package imports it,
// never the reverse. It carries no compatibility promise (only the root
// package fi is public).
package link
