//! The topic family: JPLSA and CPLSA, fitted by EM; their rows are topic
//! distributions.

pub mod plsa;
