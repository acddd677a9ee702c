//! One rank connection: JSON lines over TCP.

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

#[derive(Debug)]
pub struct Conn {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    line: Vec<u8>,
}

impl Conn {
    pub fn new(stream: TcpStream) -> Conn {
        // the window's open and close must not wait for more bytes to fill a segment
        let _ = stream.set_nodelay(true);
        let (r, w) = stream.into_split();
        Conn { reader: BufReader::new(r), writer: w, line: Vec::new() }
    }

    pub async fn send<T: Serialize>(&mut self, message: &T) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.writer.write_all(&line).await?;
        self.writer.flush().await
    }

    /// The next message; `None` when the other side closed the connection. Cancel-safe (it waits
    /// in `select!` beside the window's commands): `read_until` keeps a partial line in `line`.
    pub async fn recv<T: DeserializeOwned>(&mut self) -> std::io::Result<Option<T>> {
        loop {
            if self.line.ends_with(b"\n") {
                let parsed = serde_json::from_slice(&self.line).map_err(std::io::Error::other);
                self.line.clear();
                return parsed.map(Some);
            }
            if self.reader.read_until(b'\n', &mut self.line).await? == 0 {
                return Ok(None);
            }
        }
    }
}
