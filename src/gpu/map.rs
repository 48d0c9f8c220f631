//! Buffer mapping as a real future: [`MapRequest`], a `futures-intrusive` oneshot channel
//! completed by wgpu's `map_async` callback, with no busy polling. Native wgpu runs that
//! callback only inside `Device::poll`, so whoever waits must see that the device is polled
//! (see [`super::readback`]).

use std::ops::Range;

use futures_intrusive::channel::shared::{oneshot_channel, OneshotReceiver};

use crate::error::{Error, Result};

/// A pending `map_async` (read mode): resolves when wgpu runs the map callback, which it
/// does inside a later `Device::poll` (see [`super::readback`]).
pub(crate) struct MapRequest {
    rx: OneshotReceiver<std::result::Result<(), wgpu::BufferAsyncError>>,
}

/// Asks wgpu to map `range` of `buffer` for reading.
pub(crate) fn map_read(buffer: &wgpu::Buffer, range: Range<u64>) -> MapRequest {
    let (tx, rx) = oneshot_channel();
    buffer.map_async(wgpu::MapMode::Read, range, move |r| {
        // The receiver is gone only when the waiting future was dropped.
        let _ = tx.send(r);
    });
    MapRequest { rx }
}

impl MapRequest {
    /// Waits (asynchronously, without polling the device) for the map to complete.
    pub async fn wait(self) -> Result<()> {
        match self.rx.receive().await {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(Error::Gpu(format!("buffer map failed: {e}"))),
            None => Err(Error::Gpu("buffer map callback dropped".into())),
        }
    }
}
