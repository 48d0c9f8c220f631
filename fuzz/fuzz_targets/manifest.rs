//! Any bytes as `manifest.json`: parsing and the field checks return a manifest or an error,
//! never panic; an accepted manifest survives a write and a read unchanged, and still passes.
#![no_main]
use l3::shard::Manifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(m) = serde_json::from_slice::<Manifest>(data) else {
        return;
    };
    if m.check_fields().is_err() {
        return;
    }
    let again: Manifest = serde_json::from_slice(&serde_json::to_vec(&m).unwrap()).unwrap();
    assert_eq!(again, m);
    assert!(again.check_fields().is_ok());
});
