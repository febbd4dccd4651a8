//! The fast path. (Being written.)
