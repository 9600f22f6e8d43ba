//! The shared kit of the models: what several families use (layers and
//! losses, optimisers, row gathers and their kernels, LSTMs, RBMs, the
//! linear-algebra kit of the projection models, pretrained starts). The kit
//! imports the contract ([`crate::models`]) and nothing of a family.

pub mod attention;
mod bce;
pub mod cca;
#[cfg(feature = "cudnn")]
pub mod cudnn_lstm;
pub mod fused;
pub mod implicit;
pub mod late;
pub mod linear;
pub mod logit_bce;
pub mod lstm;
pub mod nn;
pub mod optim;
pub mod precision;
pub mod pretrained;
pub mod rbm;
pub mod rows;
pub mod vmath;
