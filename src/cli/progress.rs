//! Progress on stderr for commands that can take more than a second: drawn
//! only when stderr is a terminal (indicatif hides itself otherwise, so
//! pipes and tests see nothing), and cleared when the work is done.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A spinner with a label and the elapsed time; a fraction can be shown
/// when the engine reports one. Cleared on drop.
pub struct Progress(ProgressBar);

impl Progress {
    /// Starts a spinner saying `msg`.
    pub fn start(msg: impl Into<String>) -> Progress {
        let pb = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            pb.set_style(style);
        }
        pb.set_message(msg.into());
        pb.enable_steady_tick(Duration::from_millis(120));
        Progress(pb)
    }

    /// Shows `label` and, for a fraction in 0..=1, its percentage.
    pub fn update(&self, frac: f64, label: &str) {
        if (0.0..=1.0).contains(&frac) {
            self.0
                .set_message(format!("{label} {:>3.0}%", frac * 100.0));
        } else {
            self.0.set_message(label.to_string());
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}
