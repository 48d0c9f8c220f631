//! Any pixels, any shape, any options: encode then decode gives the same pixels, or pixels
//! within the bound for an error-bounded encode (bit 7 of the third byte: bound 1..=8).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (params, pixels) = data.split_at(4);
    let channels = params[0] % 4 + 1;
    let color = l3::ColorType::from_channels(channels).unwrap();
    // Bit 5 of params[0]: four times as wide, so that rows of 8-px patches hold more than
    // one run of shared codes (64 patches).
    let width = (params[1] as u32 % 200 + 1) * if params[0] & 0x20 != 0 { 4 } else { 1 };
    let patch_log2 = params[2] % 5 + 3;
    let predictor = match params[3] % 5 {
        0 => l3::PredictorChoice::Best,
        n => l3::PredictorChoice::Fixed(l3::FastPredictor::from_id(n - 1).unwrap()),
    };
    let sixteen = params[3] & 0x80 != 0;
    let per_pixel = channels as usize * if sixteen { 2 } else { 1 };
    let height = (pixels.len() / per_pixel / width as usize) as u32;
    if height == 0 {
        return;
    }
    let n = (width * height) as usize * per_pixel;
    // Bit 6 of params[3] picks the compact profile; bits 4-6 of params[2], bit 5 of
    // params[3] and bit 7 of params[0] its encoder options.
    let compact = l3::CompactOptions {
        predictors: l3::PredictorSet::all(),
        subtract_green: params[2] & 0x10 != 0,
        pair_tokens: params[2] & 0x20 != 0,
        run_tokens: params[2] & 0x40 != 0,
        palette: params[3] & 0x20 != 0,
        shared_codes: params[0] & 0x80 != 0,
    };
    let profile = if params[3] & 0x40 != 0 {
        l3::ProfileOptions::Compact(compact)
    } else {
        l3::ProfileOptions::Fast(l3::FastOptions { predictor })
    };
    let max_error = if params[2] & 0x80 != 0 {
        (params[1] % 8 + 1) as u16
    } else {
        0
    };
    let options = l3::EncodeOptions {
        profile,
        patch_log2,
        // Bit 6 of params[0]: on rayon's pool (the compact encoder's windows and runs).
        parallel: params[0] & 0x40 != 0,
        max_error,
    };
    let samples16: Vec<u16> = if sixteen {
        pixels[..n]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect()
    } else {
        Vec::new()
    };
    let samples = if sixteen {
        l3::Samples::U16(&samples16)
    } else {
        l3::Samples::U8(&pixels[..n])
    };
    let raw = l3::RawImage {
        width,
        height,
        color,
        samples,
    };
    let file = l3::encode::encode(&raw, &options).expect("valid input encodes");
    let (_, decoded) =
        l3::decode::decode(&file, &l3::DecodeOptions::default()).expect("own output decodes");
    let e = max_error as u32;
    if sixteen {
        let back: Vec<u16> = decoded
            .chunks_exact(2)
            .map(|c| u16::from_ne_bytes([c[0], c[1]]))
            .collect();
        for (a, b) in samples16.iter().zip(&back) {
            assert!(
                (*a as u32).abs_diff(*b as u32) <= e,
                "{a} -> {b}, bound {e}"
            );
        }
    } else {
        for (a, b) in pixels[..n].iter().zip(&decoded) {
            assert!(
                (*a as u32).abs_diff(*b as u32) <= e,
                "{a} -> {b}, bound {e}"
            );
        }
    }
});
