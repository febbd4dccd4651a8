//! The slow path: OpenFlow-style rule tables, the rule classifier with
//! wildcard tracking, and translation to datapath actions plus the widest
//! correct megaflow. (Being written.)

pub mod odp;
