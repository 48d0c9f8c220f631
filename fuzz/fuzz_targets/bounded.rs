//! Any bytes as an error-bounded array of 1 to 4 axes (field version 3): the header parser and
//! the decoder return values or an error, never panic or over-allocate; decoded values match
//! the header. Half the inputs get their CRC recomputed so mutations reach the structural
//! checks. Every input that decodes is re-encoded within its stated bound, and the result
//! (version 3, or version 2 where the bound is too fine for the bins) must decode within that
//! bound of the first decode (NaN and infinities exactly).
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;
use common::{decode_options, half_with_crc};

fuzz_target!(|input: &[u8]| {
    let data = half_with_crc(input);
    let options = decode_options(1 << 22, true);
    let _ = l3::field::parse_bounded(&data);
    if let Ok((h, values)) = l3::field::decode_bounded(&data, &options) {
        assert_eq!(values.len() as u64, h.len());
        let o = l3::field::BoundedOptions {
            fill_value: h.fill_value,
            parallel: false,
            ..l3::field::BoundedOptions::new(h.bound)
        };
        // A hostile header may state a bound too small for the decoded range: an error then,
        // or (a bound too fine for the bins) the values stored exactly, as version 2.
        if let Ok(again) = l3::field::encode_bounded(&values, &h.shape, &o) {
            let (_, back) = l3::field::decode_float_array(&again, &options).unwrap();
            let l3::field::FloatVec::F32(back) = back else {
                panic!("an f32 array re-encoded as another type");
            };
            for (&v, &b) in values.iter().zip(&back) {
                let special =
                    !v.is_finite() || h.fill_value.is_some_and(|f| f.to_bits() == v.to_bits());
                if special {
                    assert!(v.to_bits() == b.to_bits() || (v.is_nan() && b.is_nan()));
                } else {
                    assert!((v as f64 - b as f64).abs() <= h.bound);
                }
            }
        }
    }
});
