// Package transport is the contract between gofi's provider-neutral engine
// and the byte movers beneath it (package shm, package net). It holds only
// types: the engine implements Sink and drives Transport; each provider
// implements Transport. Nothing here imports another gofi package, so the
// dependency direction stays engine -> {shm, net} -> transport.
//
// It carries no compatibility promise: only the root package fi is public.
package transport
