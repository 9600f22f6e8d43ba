//! One module per screen, each with its state, key handling, backend
//! answers and drawing; the App shell (`app.rs`) dispatches to them and
//! `ui.rs` draws the frame around them.

pub mod compare;
pub mod data;
pub mod jobs;
pub mod neighbours;
pub mod search;
