//! Ring walk tests.
