//! Just enough HTTP/1.1 for one known client: request heads, bodies framed by
//! `content-length` or `transfer-encoding: chunked`, and responses framed by
//! `content-length`, by chunks (server-sent events on a kept-alive
//! connection) or by closing the connection.

use std::io;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A request head is refused past this size; the client's are a few hundred bytes.
const MAX_HEAD: usize = 64 * 1024;
/// A request body is refused past this size; the client's reach a few megabytes.
const MAX_BODY: usize = 256 * 1024 * 1024;

/// The request line and headers of one request.
pub struct Head {
    pub method: String,
    /// The request target as sent, query included (`/v1/messages?beta=true`).
    pub target: String,
    /// Header names lower-cased (HTTP names are case-insensitive), values as sent.
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The path without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    /// HTTP/1.1 keeps the connection unless the client asks to close it.
    pub fn keep_alive(&self) -> bool {
        !self.has_token("connection", "close")
    }

    pub fn expects_continue(&self) -> bool {
        self.has_token("expect", "100-continue")
    }
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// Reads one line ending in LF, counting it against the head budget.
async fn line<R: AsyncBufRead + Unpin>(r: &mut R, budget: &mut usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let n = (&mut *r)
        .take(*budget as u64 + 1)
        .read_until(b'\n', &mut buf)
        .await?;
    if n > *budget {
        return Err(bad("request head too large"));
    }
    *budget -= n;
    if buf.last() != Some(&b'\n') {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    while matches!(buf.last(), Some(b'\n' | b'\r')) {
        buf.pop();
    }
    Ok(buf)
}

/// Reads a request head; `None` on a clean end of the connection between
/// requests.
pub async fn read_head<R: AsyncBufRead + Unpin>(r: &mut R) -> io::Result<Option<Head>> {
    let mut budget = MAX_HEAD;
    // Blank lines before a request line are allowed (RFC 9112 §2.2).
    let request_line = loop {
        if r.fill_buf().await?.is_empty() {
            return Ok(None);
        }
        let l = line(r, &mut budget).await?;
        if !l.is_empty() {
            break String::from_utf8_lossy(&l).into_owned();
        }
    };
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Err(bad("malformed request line"));
    };
    let mut headers = Vec::new();
    loop {
        let l = line(r, &mut budget).await?;
        if l.is_empty() {
            break;
        }
        let l = String::from_utf8_lossy(&l);
        let Some((name, value)) = l.split_once(':') else {
            return Err(bad("malformed header"));
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    Ok(Some(Head {
        method: method.to_string(),
        target: target.to_string(),
        headers,
    }))
}

/// Reads the body that follows `head`, de-chunked if it was chunked.
pub async fn read_body<R: AsyncBufRead + Unpin>(r: &mut R, head: &Head) -> io::Result<Vec<u8>> {
    if head.has_token("transfer-encoding", "chunked") {
        let mut body = Vec::new();
        let mut budget = MAX_HEAD;
        loop {
            let size_line = line(r, &mut budget).await?;
            let size_line = String::from_utf8_lossy(&size_line);
            let size = size_line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size, 16).map_err(|_| bad("bad chunk size"))?;
            if size == 0 {
                // Trailers, up to the blank line that ends the message.
                while !line(r, &mut budget).await?.is_empty() {}
                return Ok(body);
            }
            if body.len() + size > MAX_BODY {
                return Err(bad("request body too large"));
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..]).await?;
            line(r, &mut budget).await?; // the CRLF after the chunk
        }
    }
    let len = match head.header("content-length") {
        Some(v) => v.parse::<usize>().map_err(|_| bad("bad content-length"))?,
        None => 0,
    };
    if len > MAX_BODY {
        return Err(bad("request body too large"));
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).await?;
    Ok(body)
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// Writes a whole response framed by `content-length`. With `head_only`
/// (a HEAD request) the length is announced but the body not sent.
pub async fn write_full<W: AsyncWrite + Unpin>(
    w: &mut W,
    status: u16,
    extra: &[(&str, String)],
    body: &[u8],
    keep_alive: bool,
    head_only: bool,
) -> io::Result<()> {
    let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (n, v) in extra {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    out.push_str(&format!("content-length: {}\r\n", body.len()));
    out.push_str(if keep_alive {
        "connection: keep-alive\r\n\r\n"
    } else {
        "connection: close\r\n\r\n"
    });
    let mut bytes = out.into_bytes();
    if !head_only {
        bytes.extend_from_slice(body);
    }
    w.write_all(&bytes).await?;
    w.flush().await
}

pub async fn write_continue<W: AsyncWrite + Unpin>(w: &mut W) -> io::Result<()> {
    w.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
    w.flush().await
}

/// A response body sent piece by piece: chunked when the connection is kept,
/// else delimited by closing the connection (simplest for raw test clients).
pub struct Stream<'a, W> {
    w: &'a mut W,
    chunked: bool,
}

impl<'a, W: AsyncWrite + Unpin> Stream<'a, W> {
    pub async fn start(
        w: &'a mut W,
        extra: &[(&str, String)],
        keep_alive: bool,
    ) -> io::Result<Self> {
        let mut out = String::from("HTTP/1.1 200 OK\r\n");
        for (n, v) in extra {
            out.push_str(&format!("{n}: {v}\r\n"));
        }
        out.push_str(if keep_alive {
            "transfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n"
        } else {
            "connection: close\r\n\r\n"
        });
        w.write_all(out.as_bytes()).await?;
        w.flush().await?;
        Ok(Stream {
            w,
            chunked: keep_alive,
        })
    }

    pub async fn send(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(()); // an empty chunk would end a chunked body
        }
        if self.chunked {
            let mut framed = format!("{:x}\r\n", data.len()).into_bytes();
            framed.extend_from_slice(data);
            framed.extend_from_slice(b"\r\n");
            self.w.write_all(&framed).await?;
        } else {
            self.w.write_all(data).await?;
        }
        self.w.flush().await
    }

    pub async fn finish(self) -> io::Result<()> {
        if self.chunked {
            self.w.write_all(b"0\r\n\r\n").await?;
        }
        self.w.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn parses_chunked_body_and_head() {
        let raw: &[u8] = b"\r\nPOST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nX-T: y\r\n\r\n";
        let mut r = tokio::io::BufReader::new(raw);
        let head = read_head(&mut r).await.unwrap().unwrap();
        assert_eq!(head.method, "POST");
        assert_eq!(head.path(), "/v1/messages");
        assert_eq!(head.header("host"), Some("x"));
        assert_eq!(read_body(&mut r, &head).await.unwrap(), b"abcde");
        assert!(read_head(&mut r).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn refuses_huge_head() {
        let raw = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        let mut r = tokio::io::BufReader::new(raw.as_bytes());
        assert!(read_head(&mut r).await.is_err());
    }
}
