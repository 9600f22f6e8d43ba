//! An encoder's token states, for late interaction
//! ([`crate::models::kit::late`]): the last layer's state of every token a
//! text gave, as [`Encoder::encode`] computes them before pooling.

use candle_core::Device;
use ndarray::Array2;

use super::{Encoder, Window};
use crate::models::kit::late::{unit_rows, TokenStates};
use crate::models::TextRole;
use crate::{Error, Result};

impl Encoder {
    /// The token states of `texts` read as `role`: for each text, one
    /// unit-length row per token of the text itself, in reading order,
    /// with its byte span in the text. The role's prefix is read, as
    /// [`Encoder::encode`] reads it, but its tokens are not returned; the
    /// `<s>`/`</s>` of each window neither. A text longer than a window is
    /// read window by window (each with its own specials), its tokens
    /// concatenated.
    pub fn token_states(&self, texts: &[String], role: TextRole) -> Result<Vec<TokenStates>> {
        // the text starts `skip` bytes into what the tokenizer reads
        let (enc, skip) = self.tokenize(texts, role)?;
        // per text, the positions (into its ids) of the text's own tokens
        // and their spans in the text
        let mut ids = Vec::with_capacity(texts.len());
        let mut own: Vec<Vec<(usize, (usize, usize))>> = Vec::with_capacity(texts.len());
        for e in &enc {
            let mut keep = Vec::new();
            for (k, &(a, b)) in e.get_offsets().iter().enumerate() {
                if skip == 0 || b > skip {
                    keep.push((k, (a.saturating_sub(skip), b.saturating_sub(skip))));
                }
            }
            ids.push(e.get_ids().to_vec());
            own.push(keep);
        }
        let wins = self.windows(ids, self.opts.max_len, false);
        let h = self.dim();
        // each window's hidden rows (specials dropped), gathered per text
        let mut per_text: Vec<Vec<(usize, Vec<f32>)>> = vec![Vec::new(); texts.len()];
        let mut seen = vec![0usize; texts.len()];
        let mut first = vec![0usize; wins.len()];
        for (i, win) in wins.iter().enumerate() {
            first[i] = seen[win.text];
            seen[win.text] += win.ids.len() - 2;
        }
        let mut order: Vec<usize> = (0..wins.len()).collect();
        order.sort_by_key(|&i| (wins[i].ids.len(), i));
        let dev = self.bert.device().clone();
        for chunk in order.chunks(self.opts.batch.max(1)) {
            let ws: Vec<&Window> = chunk.iter().map(|&i| &wins[i]).collect();
            let (ids, mask) = self.batch(&ws, &dev)?;
            let hidden = self.bert.forward(&ids, &mask, false)?;
            let hidden = hidden.to_device(&Device::Cpu)?.to_vec3::<f32>()?;
            for (&i, rows) in chunk.iter().zip(hidden) {
                let win = &wins[i];
                let n = win.ids.len() - 2;
                for (p, row) in rows.into_iter().skip(1).take(n).enumerate() {
                    per_text[win.text].push((first[i] + p, row));
                }
            }
        }
        let mut out = Vec::with_capacity(texts.len());
        for (t, mut rows) in per_text.into_iter().enumerate() {
            rows.sort_by_key(|(p, _)| *p);
            let keep = &own[t];
            let mut a = Array2::<f32>::zeros((keep.len(), h));
            let mut spans = Vec::with_capacity(keep.len());
            for (r, (k, span)) in keep.iter().enumerate() {
                let row = &rows
                    .get(*k)
                    .ok_or_else(|| Error::invalid(format!("encoder: text {t} lost token {k}")))?
                    .1;
                if row.iter().any(|x| !x.is_finite()) {
                    return Err(Error::invalid(format!(
                        "encoder: text {t} gives a non-finite token state"
                    )));
                }
                a.row_mut(r)
                    .assign(&ndarray::ArrayView1::from(row.as_slice()));
                spans.push(*span);
            }
            out.push(TokenStates {
                rows: unit_rows(a),
                spans,
            });
        }
        Ok(out)
    }
}
