//! The linear and closed-form family: one projection matrix per language
//! (checkpoint tensors `proj.source`, `proj.target`). CL-LSI, OPCA and CCA
//! are fitted in closed form, S2Net by gradient, HDLR by metric learning
//! from a start, Procrustes by rotating pretrained term vectors. What they
//! share (and other families use too) is in [`crate::models::kit::linear`],
//! re-exported here at its old path.

pub use crate::models::kit::linear::*;

pub mod cca;
pub mod cl_lsi;
pub mod hdlr;
pub mod opca;
pub mod procrustes;
pub mod s2net;
