//! The slow path. (Being written.)
