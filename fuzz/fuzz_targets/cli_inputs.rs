//! The CLI's array and label inputs as any bytes (`cli/src/inputs.rs`, included as it is):
//! the first byte picks `.npy`, a `.json` sidecar with raw `.f32` data, or a `--labels` file
//! (CSV or JSON lines). Each returns values or an error, never panics or allocates from a
//! header's claim; an accepted array holds exactly its shape's values.
#![no_main]
use std::collections::BTreeSet;
use std::path::Path;

use libfuzzer_sys::fuzz_target;

#[path = "../../cli/src/inputs.rs"]
#[allow(dead_code)]
mod inputs;

fuzz_target!(|input: &[u8]| {
    let Some((&mode, data)) = input.split_first() else {
        return;
    };
    let values = |shape: &[u32]| shape.iter().map(|&d| d as usize).product::<usize>();
    match mode % 4 {
        0 => {
            if let Ok(a) = inputs::parse_npy(data) {
                assert_eq!(a.values.len(), values(&a.shape));
            }
        }
        1 => {
            // Sidecar text, then the raw data, split where the first two bytes say.
            if data.len() < 2 {
                return;
            }
            let cut = (u16::from_le_bytes([data[0], data[1]]) as usize).min(data.len() - 2);
            let (text, raw) = data[2..].split_at(cut);
            let (f32_path, json_path) = (Path::new("x.f32"), Path::new("x.json"));
            if let Ok(meta) = inputs::parse_sidecar(text, json_path) {
                if let Ok(a) = inputs::raw_array(raw, f32_path, meta, json_path) {
                    assert_eq!(a.values.len(), values(&a.shape));
                    assert_eq!(a.values.len() * 4, raw.len());
                }
            }
        }
        m => {
            let Ok(text) = std::str::from_utf8(data) else {
                return;
            };
            let keys: BTreeSet<String> = ["a.png", "b/c.png", "d,e.png", ""]
                .iter()
                .map(|k| k.to_string())
                .collect();
            if let Ok(labels) = inputs::parse_labels(text, m == 3, &keys, Path::new("labels")) {
                assert!(labels.keys().all(|k| keys.contains(k)));
            }
        }
    }
});
