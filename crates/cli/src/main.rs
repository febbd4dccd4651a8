//! The `flowpath` command. (Being written.)
fn main() {}
