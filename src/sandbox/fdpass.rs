//! Passing a child's socket from the zygote to the server (`SCM_RIGHTS`),
//! with the child's pid as the message body.
//!
//! Invariant: a received descriptor is owned by exactly one `OwnedFd`.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::AsRawFd;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};

/// Sends `fd` and `pid` over `control`.
pub fn send_fd(control: &UnixStream, fd: RawFd, pid: i32) -> io::Result<()> {
    let body = pid.to_le_bytes();
    let iov = [IoSlice::new(&body)];
    let fds = [fd];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    sendmsg::<()>(control.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)
        .map_err(io::Error::from)?;
    Ok(())
}

/// Receives a descriptor and pid sent by [`send_fd`].
pub fn recv_fd(control: &UnixStream) -> io::Result<(OwnedFd, i32)> {
    let mut body = [0u8; 4];
    let mut iov = [IoSliceMut::new(&mut body)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
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
    let mut received = None;
    for cmsg in message.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            for fd in fds {
                // SAFETY: the kernel just gave us this descriptor; nobody else owns it.
                let owned = unsafe { OwnedFd::from_raw_fd(fd) };
                if received.is_none() {
                    received = Some(owned);
                }
            }
        }
    }
    let fd = received.ok_or_else(|| io::Error::other("no descriptor in the zygote's message"))?;
    Ok((fd, i32::from_le_bytes(body)))
}
