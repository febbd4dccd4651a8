//! Zero-copy checked packet views. (Being written.)
