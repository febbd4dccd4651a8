//! Packet I/O. (Being written.)
