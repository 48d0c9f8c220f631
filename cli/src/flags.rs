//! Flag values and file extensions that several commands share: the profile, the patch size,
//! which files are images and which are L3 files.

use clap::ValueEnum;

/// Extensions `l3 encode` picks up when given a directory (the library's, which `l3 pack`
/// plans with).
pub(crate) use l3::shard::tree::IMAGE_EXTENSIONS;
/// Extension of L3 files.
pub(crate) const L3_EXTENSION: &str = "l3";

/// The `--profile` flag of `encode`, `encode-field` and `pack`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ProfileArg {
    Fast,
    Compact,
}

impl ProfileArg {
    /// The name on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ProfileArg::Fast => "fast",
            ProfileArg::Compact => "compact",
        }
    }

    /// The library's profile.
    pub(crate) fn profile(self) -> l3::Profile {
        match self {
            ProfileArg::Fast => l3::Profile::Fast,
            ProfileArg::Compact => l3::Profile::Compact,
        }
    }
}

/// Parses `--patch-size`: a power of two from 8 to 128.
pub(crate) fn parse_patch_size(s: &str) -> Result<u32, String> {
    let v: u32 = s.parse().map_err(|e| format!("{e}"))?;
    if v.is_power_of_two() && (8..=128).contains(&v) {
        Ok(v)
    } else {
        Err("patch size must be 8, 16, 32, 64 or 128".into())
    }
}
