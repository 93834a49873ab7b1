//! Passing a new child from the zygote to the server: its socket and, where
//! the kernel has them, its pidfd (`SCM_RIGHTS`), with the child's pid as
//! the message body.
//!
//! Invariant: a received descriptor is owned by exactly one `OwnedFd`; the
//! first is always the socket, the second (if any) the pidfd.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::AsRawFd;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};

/// A child as the server receives it.
pub struct ReceivedChild {
    /// The server's end of the child's socket.
    pub socket: OwnedFd,
    /// The child's pidfd, when the zygote's kernel gave one.
    pub pidfd: Option<OwnedFd>,
    /// The child's pid.
    pub pid: i32,
}

/// Sends a child's `socket`, its `pidfd` (if any) and `pid` over `control`.
pub fn send_child(
    control: &UnixStream,
    socket: RawFd,
    pidfd: Option<RawFd>,
    pid: i32,
) -> io::Result<()> {
    let body = pid.to_le_bytes();
    let iov = [IoSlice::new(&body)];
    let fds: Vec<RawFd> = std::iter::once(socket).chain(pidfd).collect();
    let cmsg = [ControlMessage::ScmRights(&fds)];
    sendmsg::<()>(control.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)
        .map_err(io::Error::from)?;
    Ok(())
}

/// Receives a child sent by [`send_child`].
pub fn recv_child(control: &UnixStream) -> io::Result<ReceivedChild> {
    let mut body = [0u8; 4];
    let mut iov = [IoSliceMut::new(&mut body)];
    let mut space = nix::cmsg_space!([RawFd; 2]);
    let message = recvmsg::<()>(
        control.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(io::Error::from)?;
    if message.bytes != 4 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "zygote closed its socket",
        ));
    }
    let mut received = Vec::new();
    for cmsg in message.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            for fd in fds {
                // SAFETY: the kernel just gave us this descriptor; nobody else owns it.
                received.push(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    let mut received = received.into_iter();
    let socket = received
        .next()
        .ok_or_else(|| io::Error::other("no descriptor in the zygote's message"))?;
    Ok(ReceivedChild {
        socket,
        pidfd: received.next(),
        pid: i32::from_le_bytes(body),
    })
}
