//! Unwinds the raw stacks a snapshot copied from threads that were in a
//! system call outside any recorded wait (`SnapshotStackRecord`): the
//! kernel gave their stack and instruction pointers, and the walk follows
//! each module's call frame information (`.eh_frame`) with framehop.
//!
//! The kernel does not give the frame pointer. Code built without frame
//! pointers needs none; for a frame that does need it (code built with
//! `-fno-omit-frame-pointer`, or at `-O0`), the walk looks for the frame's
//! record on the copied stack: a word pointing further up the stack
//! followed by a return address into code, checked one record further.
//! A stale record left in the frame's uninitialised locals by an earlier
//! call looks just like that; a direct call before the return address
//! must therefore call the function being unwound.

use crate::input::symbolize::{changed_since_run, module_at};
use crate::input::symbols::SymbolTable;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use locksuit_format::reader::ModuleInfo;
use object::{Object, ObjectSection};
use std::collections::HashMap;
use std::ops::Range;

/// Frames walked at most: a damaged stack cannot make the walk long.
const MAX_FRAMES: usize = 128;
/// Stands for the frame pointer the kernel did not give: a frame that
/// needs it fails (it points nowhere), and its record is looked for.
const UNKNOWN_BP: u64 = 1;

/// A walked stack: where the system call was made, then return addresses.
pub struct Walked {
    pub addresses: Vec<u64>,
    /// The walk reached the stack's start (the thread's first frame); false
    /// when the copy ended or a frame could not be unwound.
    pub complete: bool,
}

/// The modules as they were mapped at one module-map epoch.
struct Mapped {
    unwinder: UnwinderX86_64<Vec<u8>>,
    /// Each module's `.text`: a return address must lie in one.
    code: Vec<Code>,
}

struct Code {
    /// Where it was mapped.
    at: Range<u64>,
    /// The main program's (whose calls to its own functions never go
    /// through its PLT).
    program: bool,
    bias: u64,
    bytes: Vec<u8>,
    symbols: SymbolTable,
}

impl Mapped {
    fn code_at(&self, address: u64) -> Option<&Code> {
        self.code.iter().find(|c| c.at.contains(&address))
    }

    /// Whether `ret` follows a call that could have entered the function
    /// holding `inside`: a direct call to that function's start (or to a
    /// PLT stub, outside every `.text`, unless both are the main program's),
    /// or an indirect call.
    fn returns_from(&self, ret: u64, inside: u64) -> bool {
        let Some(code) = self.code_at(ret) else {
            return false;
        };
        let callee = self.code_at(inside);
        let before = |n: u64| -> Option<&[u8]> {
            let from = usize::try_from(ret.checked_sub(n)?.checked_sub(code.at.start)?).ok()?;
            code.bytes.get(from..from + n as usize)
        };
        if let Some(&[0xe8, a, b, c, d]) = before(5) {
            let target = ret.wrapping_add(i32::from_le_bytes([a, b, c, d]) as i64 as u64);
            if self.code_at(target).is_none() {
                let own_call = code.program && callee.is_some_and(|c| c.at == code.at);
                return !own_call;
            }
            let start = callee.and_then(|c| {
                let start = c.symbols.function_start(inside.wrapping_sub(c.bias))?;
                Some(start.wrapping_add(c.bias))
            });
            return start.is_none_or(|start| start == target);
        }
        // `call *…`: opcode 0xff with 2 in the ModRM reg field, 2 to 7
        // bytes long (a REX prefix before it is allowed).
        (2..=7).any(|n| match before(n) {
            Some([0xff, modrm, ..]) => (modrm >> 3) & 7 == 2,
            _ => false,
        })
    }
}

/// Where a thread whose stack is walked was stopped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StoppedAt {
    /// Running: `pc` is the instruction it was at, and its frame pointer
    /// is known.
    Running,
    /// In a system call, seen from user space (a snapshot): `pc` follows
    /// the call instruction, and the frame pointer is not known.
    InCall,
    /// In a system call, seen by the kernel (`locksuit attach`): `pc`
    /// follows the call instruction, and the frame pointer is the one the
    /// kernel saved on entry, exact.
    InCallWithBp,
}

pub struct StackWalker<'t> {
    modules: &'t [ModuleInfo],
    exe: &'t str,
    by_epoch: HashMap<u32, Mapped>,
    cache: CacheX86_64,
}

impl<'t> StackWalker<'t> {
    pub fn new(modules: &'t [ModuleInfo], exe: &'t str) -> Self {
        StackWalker {
            modules,
            exe,
            by_epoch: HashMap::new(),
            cache: CacheX86_64::new(),
        }
    }

    /// Walks the stack copied from `sp` (`bytes`), starting at `pc`, where
    /// the thread was stopped `at` (see [`StoppedAt`]).
    pub fn walk(
        &mut self,
        (pc, sp, bp): (u64, u64, u64),
        at: StoppedAt,
        bytes: &[u8],
        epoch: u32,
    ) -> Walked {
        let running = at == StoppedAt::Running;
        let bp_known = at != StoppedAt::InCall;
        let (modules, exe) = (self.modules, self.exe);
        let mapped = self
            .by_epoch
            .entry(epoch)
            .or_insert_with(|| mapped_at(modules, exe, epoch));
        let read = |at: u64| -> Result<u64, ()> {
            let from = usize::try_from(at.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let word = bytes.get(from..from.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(word.try_into().map_err(|_| ())?))
        };
        let mut read_stack = read;
        let mut regs = UnwindRegsX86_64::new(pc, sp, if bp_known { bp } else { UNKNOWN_BP });
        // After a system call, pc follows the call instruction: looked up
        // like a return address, in the call's own function, and with no
        // prologue or epilogue to allow for.
        let address = match running {
            true => Some(FrameAddress::from_instruction_pointer(pc)),
            false => FrameAddress::from_return_address(pc),
        };
        let Some(mut address) = address else {
            return Walked {
                addresses: Vec::new(),
                complete: false,
            };
        };
        let mut addresses = vec![pc];
        while addresses.len() < MAX_FRAMES {
            let before = regs;
            let mut step =
                mapped
                    .unwinder
                    .unwind_frame(address, &mut regs, &mut self.cache, &mut read_stack);
            if step.is_err() && before.bp() == UNKNOWN_BP {
                // The frame needs the frame pointer: find its record.
                regs = before;
                let inside = match address {
                    FrameAddress::InstructionPointer(pc) => pc,
                    FrameAddress::ReturnAddress(ret) => ret.get() - 1,
                };
                let is_return = |ret: u64| mapped.returns_from(ret, inside);
                let is_code = |ret: u64| mapped.code_at(ret).is_some();
                let Some(bp) = frame_record(&read, (&is_return, &is_code), before.sp()) else {
                    return Walked {
                        addresses,
                        complete: false,
                    };
                };
                regs.set_bp(bp);
                step = mapped.unwinder.unwind_frame(
                    address,
                    &mut regs,
                    &mut self.cache,
                    &mut read_stack,
                );
            }
            match step {
                Ok(Some(ret)) => match FrameAddress::from_return_address(ret) {
                    Some(next) => {
                        addresses.push(ret);
                        address = next;
                    }
                    None => break,
                },
                Ok(None) => {
                    return Walked {
                        addresses,
                        complete: true,
                    }
                }
                Err(_) => break,
            }
        }
        Walked {
            addresses,
            complete: false,
        }
    }
}

/// The lowest frame record at or above `sp` for the frame being unwound: a
/// word pointing further up the stack (or 0, the outermost) followed by an
/// address that returns from it (`returns`), whose own next record, if the
/// copy reaches it, holds an address into code (`is_code`).
fn frame_record(
    read: &impl Fn(u64) -> Result<u64, ()>,
    (returns, is_code): (&dyn Fn(u64) -> bool, &dyn Fn(u64) -> bool),
    sp: u64,
) -> Option<u64> {
    let links_up = |at: u64, next: u64| next == 0 || next > at;
    let mut at = sp;
    while let (Ok(next), Ok(ret)) = (read(at), read(at + 8)) {
        if links_up(at, next) && returns(ret) {
            let further = match (read(next), read(next + 8)) {
                (Ok(after), Ok(ret)) => links_up(next, after) && is_code(ret),
                _ => true,
            };
            if next == 0 || further {
                return Some(at);
            }
        }
        at += 8;
    }
    None
}

/// Every module mapped at `epoch`, with its unwind sections, read from its
/// file (a file changed since the run is left out: its tables would lie).
fn mapped_at(modules: &[ModuleInfo], exe: &str, epoch: u32) -> Mapped {
    let mut unwinder = UnwinderX86_64::new();
    let mut code = Vec::new();
    for m in modules {
        // The module that held this range then (a later one may reuse it).
        if !module_at(modules, m.start, epoch).is_some_and(|at| std::ptr::eq(at, m)) {
            continue;
        }
        let path = if m.path.is_empty() { exe } else { &m.path };
        if changed_since_run(path, m).is_some() {
            continue;
        }
        let Ok(data) = std::fs::read(path) else {
            continue;
        };
        let Ok(file) = object::File::parse(&*data) else {
            continue;
        };
        let section = |name: &str| {
            let s = file.section_by_name(name)?;
            let bytes = s.data().ok()?.to_vec();
            Some((s.address()..s.address() + s.size(), bytes))
        };
        let (eh_frame_svma, eh_frame) = section(".eh_frame").unzip();
        let (eh_frame_hdr_svma, eh_frame_hdr) = section(".eh_frame_hdr").unzip();
        // framehop reads instructions only for a first frame interrupted
        // mid-function; these walks start after a system call.
        if let Some((text, bytes)) = section(".text") {
            code.push(Code {
                at: text.start.wrapping_add(m.bias)..text.end.wrapping_add(m.bias),
                program: path == exe,
                bias: m.bias,
                bytes,
                symbols: SymbolTable::load(path),
            });
        }
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            eh_frame_svma,
            eh_frame,
            eh_frame_hdr_svma,
            eh_frame_hdr,
            debug_frame: section(".debug_frame").map(|(_, bytes)| bytes),
            ..Default::default()
        };
        unwinder.add_module(Module::new(path.to_string(), m.start..m.end, m.bias, info));
    }
    Mapped { unwinder, code }
}
