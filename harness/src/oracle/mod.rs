//! Bindings to independent oracles (in progress).
