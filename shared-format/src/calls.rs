//! Blocking calls beyond the lock API (sleeps, waits, I/O, joins, barrier
//! waits) as [`EVENT_CALL`](crate::EVENT_CALL) events: which call it was
//! and what kind of file descriptor it used. The shim writes one only when
//! the call blocked for at least the header's `block_min_us`; the analyzer
//! gives each a blocking class at report time.

/// A blocking call, as stored in an `EVENT_CALL` event's `seq`. Numbers are
/// part of the format: new calls get new numbers, old ones never change.
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockingCall {
    Nanosleep = 1,
    ClockNanosleep = 2,
    Usleep = 3,
    Sleep = 4,
    Poll = 10,
    Ppoll = 11,
    Select = 12,
    Pselect = 13,
    EpollWait = 14,
    EpollPwait = 15,
    Sigwait = 16,
    Sigwaitinfo = 17,
    Sigtimedwait = 18,
    Waitpid = 19,
    Wait4 = 20,
    Wait = 21,
    Waitid = 22,
    Read = 30,
    Write = 31,
    Pread = 32,
    Pwrite = 33,
    Readv = 34,
    Writev = 35,
    Recv = 36,
    Recvfrom = 37,
    Recvmsg = 38,
    Send = 39,
    Sendto = 40,
    Sendmsg = 41,
    Accept = 42,
    Accept4 = 43,
    Connect = 44,
    Fsync = 45,
    Fdatasync = 46,
    Open = 47,
    Openat = 48,
    Join = 60,
    BarrierWait = 61,
    /// A futex wait made through libc's `syscall()` (Rust's std locks,
    /// hand-written futex code).
    Futex = 62,
}

const ALL: [BlockingCall; 39] = {
    use BlockingCall::*;
    [
        Nanosleep,
        ClockNanosleep,
        Usleep,
        Sleep,
        Poll,
        Ppoll,
        Select,
        Pselect,
        EpollWait,
        EpollPwait,
        Sigwait,
        Sigwaitinfo,
        Sigtimedwait,
        Waitpid,
        Wait4,
        Wait,
        Waitid,
        Read,
        Write,
        Pread,
        Pwrite,
        Readv,
        Writev,
        Recv,
        Recvfrom,
        Recvmsg,
        Send,
        Sendto,
        Sendmsg,
        Accept,
        Accept4,
        Connect,
        Fsync,
        Fdatasync,
        Open,
        Openat,
        Join,
        BarrierWait,
        Futex,
    ]
};

impl BlockingCall {
    pub fn from_u16(v: u16) -> Option<Self> {
        ALL.iter().copied().find(|c| *c as u16 == v)
    }

    /// The C function's name, as a person would look it up.
    pub fn name(self) -> &'static str {
        use BlockingCall::*;
        match self {
            Nanosleep => "nanosleep",
            ClockNanosleep => "clock_nanosleep",
            Usleep => "usleep",
            Sleep => "sleep",
            Poll => "poll",
            Ppoll => "ppoll",
            Select => "select",
            Pselect => "pselect",
            EpollWait => "epoll_wait",
            EpollPwait => "epoll_pwait",
            Sigwait => "sigwait",
            Sigwaitinfo => "sigwaitinfo",
            Sigtimedwait => "sigtimedwait",
            Waitpid => "waitpid",
            Wait4 => "wait4",
            Wait => "wait",
            Waitid => "waitid",
            Read => "read",
            Write => "write",
            Pread => "pread",
            Pwrite => "pwrite",
            Readv => "readv",
            Writev => "writev",
            Recv => "recv",
            Recvfrom => "recvfrom",
            Recvmsg => "recvmsg",
            Send => "send",
            Sendto => "sendto",
            Sendmsg => "sendmsg",
            Accept => "accept",
            Accept4 => "accept4",
            Connect => "connect",
            Fsync => "fsync",
            Fdatasync => "fdatasync",
            Open => "open",
            Openat => "openat",
            Join => "pthread_join",
            BarrierWait => "pthread_barrier_wait",
            Futex => "futex",
        }
    }

    /// Whether the call's first argument is a file descriptor (so the
    /// event says what kind of file it was).
    pub fn takes_fd(self) -> bool {
        use BlockingCall::*;
        matches!(
            self,
            Read | Write
                | Pread
                | Pwrite
                | Readv
                | Writev
                | Recv
                | Recvfrom
                | Recvmsg
                | Send
                | Sendto
                | Sendmsg
                | Accept
                | Accept4
                | Connect
                | Fsync
                | Fdatasync
        )
    }
}

/// What a call's file descriptor was, in an `EVENT_CALL` event's aux bits
/// 8..16 (found with `fstat` after the call blocked; 0 = no descriptor or
/// unknown).
pub const FD_NONE: u32 = 0;
pub const FD_FILE: u32 = 1;
pub const FD_PIPE: u32 = 2;
pub const FD_SOCKET: u32 = 3;
/// A terminal or other character device.
pub const FD_DEVICE: u32 = 4;
pub const FD_OTHER: u32 = 5;

/// The name of an `FD_*` kind.
pub fn fd_kind_name(kind: u32) -> Option<&'static str> {
    Some(match kind {
        FD_FILE => "file",
        FD_PIPE => "pipe",
        FD_SOCKET => "socket",
        FD_DEVICE => "device",
        FD_OTHER => "other",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_round_trips_by_number_and_names_are_unique() {
        let mut names = std::collections::HashSet::new();
        for c in ALL {
            assert_eq!(BlockingCall::from_u16(c as u16), Some(c));
            names.insert(c.name());
        }
        assert_eq!(names.len(), 39);
        assert_eq!(BlockingCall::from_u16(0), None);
        assert_eq!(BlockingCall::from_u16(999), None);
    }
}
