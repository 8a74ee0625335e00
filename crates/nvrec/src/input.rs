//! The input `--source` names, opened: the byte sources of [`crate::source`] (the test
//! pattern, zeros, stdin, a file or FIFO) and the record sources of [`crate::net`] (UDP,
//! TCP, packet capture). Above both, so that `source` knows nothing of the network.

use crate::pattern::Pattern;
use crate::source::{PatternSource, Source, SourceSpec, StreamSource, ZeroSource};
use std::fs::File;
use std::io;

/// Opens the source a spec names.
pub fn open_source(spec: &SourceSpec) -> io::Result<Box<dyn Source>> {
    Ok(match spec {
        SourceSpec::Pattern { seed } => Box::new(PatternSource(Pattern::new(*seed))),
        SourceSpec::Zero => Box::new(ZeroSource),
        SourceSpec::Stdin => Box::new(StreamSource::stdin()),
        SourceSpec::Path(path) => {
            let file = File::open(path).map_err(|error| {
                io::Error::new(
                    error.kind(),
                    format!("opening source {}: {error}", path.display()),
                )
            })?;
            // A directory opens, and fails only at the first read: too late, once a
            // recorder has formatted its targets.
            if file.metadata().is_ok_and(|metadata| metadata.is_dir()) {
                return Err(io::Error::new(
                    io::ErrorKind::IsADirectory,
                    format!(
                        "source {} is a directory; give a file, a FIFO, or stdin",
                        path.display()
                    ),
                ));
            }
            Box::new(StreamSource::file(file))
        }
        SourceSpec::Udp(addresses) => Box::new(crate::net::UdpSource::bind(addresses)?),
        SourceSpec::Capture(names) => Box::new(crate::net::CaptureSource::open(names)?),
        SourceSpec::Tcp(addresses) => Box::new(crate::net::TcpSource::listen(addresses)?),
    })
}
