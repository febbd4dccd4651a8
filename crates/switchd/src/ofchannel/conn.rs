//! One OpenFlow connection's transport: a Unix socket, TCP, or TLS over
//! TCP.

use super::tls::TlsConn;
use super::POLL;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

pub(crate) enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
    Tls(TlsConn),
}

impl Conn {
    pub(super) fn prepare(&self) -> std::io::Result<()> {
        match self {
            Conn::Unix(s) => {
                s.set_nonblocking(false)?;
                s.set_read_timeout(Some(POLL))?;
                s.set_write_timeout(Some(Duration::from_secs(10)))
            }
            Conn::Tcp(s) => {
                s.set_nonblocking(false)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(POLL))?;
                s.set_write_timeout(Some(Duration::from_secs(10)))
            }
            Conn::Tls(t) => Conn::Tcp(t.socket().try_clone()?).prepare(),
        }
    }

    pub(super) fn try_clone(&self) -> std::io::Result<Conn> {
        Ok(match self {
            Conn::Unix(s) => Conn::Unix(s.try_clone()?),
            Conn::Tcp(s) => Conn::Tcp(s.try_clone()?),
            Conn::Tls(t) => Conn::Tls(t.try_clone()?),
        })
    }

    /// Waits up to `budget` for the connection to become readable
    /// without sleeping (a zero-timeout poll, letting other threads on
    /// this CPU run between tries); true when it did. A
    /// request-per-round-trip client (`ovs-ofctl add-flows` waits for a
    /// barrier's answer after every flow) sends its next message within
    /// tens of microseconds of an answer: catching it here spares this
    /// thread a sleep and the client's send a wake-up. Not for TLS, whose
    /// records rustls may already hold (false at once).
    pub(super) fn readable_within(&self, budget: Duration) -> bool {
        let fd = match self {
            Conn::Unix(s) => s.as_raw_fd(),
            Conn::Tcp(s) => s.as_raw_fd(),
            Conn::Tls(_) => return false,
        };
        let start = Instant::now();
        loop {
            if flowpath_netdev::wait_readable_us(&[fd], 0) > 0 {
                return true;
            }
            if start.elapsed() >= budget {
                return false;
            }
            std::thread::yield_now();
        }
    }

    pub(super) fn shutdown(&self) {
        let _ = match self {
            Conn::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            Conn::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            Conn::Tls(t) => {
                t.shutdown();
                Ok(())
            }
        };
    }
}

impl Read for Conn {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(b),
            Conn::Tcp(s) => s.read(b),
            Conn::Tls(t) => t.read(b),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.write(b),
            Conn::Tcp(s) => s.write(b),
            Conn::Tls(t) => t.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_within_sees_a_message_that_comes_while_it_waits() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut c = Conn::Unix(a);
        c.prepare().unwrap();
        // Nothing sent: the wait ends, nothing to read.
        assert!(!c.readable_within(Duration::from_millis(2)));
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            b.write_all(b"hello").unwrap();
            b
        });
        assert!(c.readable_within(Duration::from_secs(10)));
        let mut buf = [0u8; 8];
        assert_eq!(c.read(&mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        // The socket is still the blocking one `prepare` made: a read with
        // nothing to read waits for its timeout, it does not fail at once.
        let t0 = Instant::now();
        let e = c.read(&mut buf).unwrap_err();
        assert!(matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ));
        assert!(t0.elapsed() >= POLL / 2, "{:?}", t0.elapsed());
        drop(t.join().unwrap());
    }
}
