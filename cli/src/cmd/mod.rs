//! The commands, one file each (`encode-field` and `decode-field` share `field`): each holds
//! its clap arguments and its `cmd_*` function, which returns the number of failures (files,
//! or shards for `verify-dataset`; `main` exits with 1 when it is above 0).

pub(crate) mod bench_loader;
pub(crate) mod cp;
pub(crate) mod decode;
pub(crate) mod demo;
pub(crate) mod encode;
pub(crate) mod field;
pub(crate) mod info;
pub(crate) mod ls;
pub(crate) mod pack;
pub(crate) mod unpack;
pub(crate) mod verify;
pub(crate) mod verify_dataset;
