//! The neural family, trained by gradient in candle: XCNN, the bilingual
//! autoencoder (BAE), DBN-CCA and the adversarial BiLSTM.

pub mod adv_bilstm;
pub mod bae;
pub mod dbn_cca;
pub mod xcnn;
