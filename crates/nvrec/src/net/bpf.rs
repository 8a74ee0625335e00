//! Classic BPF programs: read as `tcpdump -ddd EXPR` prints them (or as a list of
//! `[code, jt, jf, k]`), attached to a capture socket (`capture.rs`), and run here on stored
//! frames, so that `export --filter-bpf` cuts a recorded capture with the same program a live
//! capture takes.
//!
//! The interpreter is our own: no maintained crate runs classic BPF in user space (the ones
//! there are compile eBPF, or wrap libpcap). It follows what libpcap does for a file: a load
//! past the bytes kept rejects the packet, `len` is the length on the wire, a division by a
//! zero X rejects it. Programs are checked once, before any packet ([`BpfFilter::new`]):
//! known opcodes, jumps that land inside, scratch words that exist, no division by a
//! constant 0, a return at the end. Jumps go forward only, so every run ends.
//!
//! Deliberately absent: the kernel's ancillary loads (`SKF_AD_OFF` and below), which read
//! what a socket knows of a live packet (its VLAN tag, its interface) and a stored frame
//! does not carry; a program that uses them is refused.

/// Instructions of a classic BPF program, at most (BPF_MAXINSNS).
pub const BPF_INSTRUCTIONS_MAX: usize = 4096;

/// One instruction of a classic BPF program (struct sock_filter).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BpfInstruction {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// Why the text of a BPF program was refused; lines count from 1 (blank lines not
/// counted), a list's instructions from 0.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BpfTextError {
    #[error("empty: give the output of tcpdump -ddd EXPR")]
    Empty,
    #[error("line 1: {0:?} is not the instruction count (tcpdump -ddd)")]
    NotACount(String),
    #[error("line 1: {0} instructions; a program has 1 to {BPF_INSTRUCTIONS_MAX}")]
    CountOutOfRange(usize),
    #[error("line {line}: {text:?} is not an instruction (code jt jf k, decimal)")]
    NotAnInstruction { line: usize, text: String },
    #[error("line 1 says {said} instructions, {found} follow")]
    CountMismatch { said: usize, found: usize },
    #[error("a list of instructions is [[code, jt, jf, k], ...]")]
    NotAList,
    #[error("instruction {0} is not [code, jt, jf, k]")]
    NotAListItem(usize),
    #[error("{0} instructions; a program has 1 to {BPF_INSTRUCTIONS_MAX}")]
    ListLength(usize),
}

/// Reads a classic BPF program as `tcpdump -ddd EXPR` prints it: the instruction count on
/// the first line, then one instruction a line as four decimal numbers (code jt jf k); or,
/// as the service takes it, a list of `[code, jt, jf, k]` (`[[40, 0, 0, 12], ...]`).
pub fn parse_bpf_program(text: &str) -> Result<Vec<BpfInstruction>, BpfTextError> {
    if text.trim_start().starts_with('[') {
        return parse_bpf_list(text);
    }
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .enumerate();
    let (_, first) = lines.next().ok_or(BpfTextError::Empty)?;
    let count: usize = first
        .parse()
        .map_err(|_| BpfTextError::NotACount(first.to_string()))?;
    if count == 0 || count > BPF_INSTRUCTIONS_MAX {
        return Err(BpfTextError::CountOutOfRange(count));
    }
    let mut program = Vec::with_capacity(count);
    for (index, line) in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let instruction =
            instruction_of(&fields).ok_or_else(|| BpfTextError::NotAnInstruction {
                line: index + 1,
                text: line.to_string(),
            })?;
        program.push(instruction);
    }
    if program.len() != count {
        return Err(BpfTextError::CountMismatch {
            said: count,
            found: program.len(),
        });
    }
    Ok(program)
}

/// An instruction from its four fields as text (decimal; a negative k, which tcpdump prints
/// for some, is its two's complement).
fn instruction_of(fields: &[&str]) -> Option<BpfInstruction> {
    let [code, jt, jf, k] = fields else {
        return None;
    };
    Some(BpfInstruction {
        code: code.parse().ok()?,
        jt: jt.parse().ok()?,
        jf: jf.parse().ok()?,
        k: k.parse::<i64>().ok().and_then(|k| {
            u32::try_from(k)
                .ok()
                .or_else(|| i32::try_from(k).ok().map(|k| k as u32))
        })?,
    })
}

/// `[[code, jt, jf, k], ...]`: the list form.
fn parse_bpf_list(text: &str) -> Result<Vec<BpfInstruction>, BpfTextError> {
    let mut rest = text
        .trim()
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .ok_or(BpfTextError::NotAList)?
        .trim();
    let mut program = Vec::new();
    while !rest.is_empty() && program.len() <= BPF_INSTRUCTIONS_MAX {
        let bad = BpfTextError::NotAListItem(program.len());
        let (fields, after) = rest
            .strip_prefix('[')
            .and_then(|open| open.split_once(']'))
            .ok_or(bad.clone())?;
        let fields: Vec<&str> = fields.split(',').map(str::trim).collect();
        program.push(instruction_of(&fields).ok_or(bad.clone())?);
        rest = after.trim_start();
        if !rest.is_empty() {
            rest = rest.strip_prefix(',').ok_or(bad)?.trim_start();
        }
    }
    if program.is_empty() || program.len() > BPF_INSTRUCTIONS_MAX {
        return Err(BpfTextError::ListLength(program.len()));
    }
    Ok(program)
}

// Instruction classes, sizes, modes and operations (linux/bpf_common.h, linux/filter.h).
mod op {
    pub const LD: u16 = 0x00;
    pub const LDX: u16 = 0x01;
    pub const ST: u16 = 0x02;
    pub const STX: u16 = 0x03;
    pub const ALU: u16 = 0x04;
    pub const JMP: u16 = 0x05;
    pub const RET: u16 = 0x06;
    pub const MISC: u16 = 0x07;
    pub const W: u16 = 0x00;
    pub const H: u16 = 0x08;
    pub const B: u16 = 0x10;
    pub const IMM: u16 = 0x00;
    pub const ABS: u16 = 0x20;
    pub const IND: u16 = 0x40;
    pub const MEM: u16 = 0x60;
    pub const LEN: u16 = 0x80;
    pub const MSH: u16 = 0xa0;
    pub const X: u16 = 0x08;
    pub const RET_A: u16 = 0x10;
    pub const TXA: u16 = 0x80;
    /// Loads at or above this offset are the kernel's ancillary data (SKF_LL_OFF).
    pub const ANCILLARY_K: u32 = 0xffe0_0000;
}

/// Scratch memory words (BPF_MEMWORDS).
const MEMORY_WORDS: u32 = 16;

/// A program that cannot run on stored frames.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BpfError {
    #[error("instruction {index}: unknown opcode {code:#06x}")]
    Opcode { index: usize, code: u16 },
    #[error("instruction {index}: jumps past the end of the program")]
    Jump { index: usize },
    #[error("instruction {index}: scratch word {k}, of {MEMORY_WORDS}")]
    Memory { index: usize, k: u32 },
    #[error("instruction {index}: divides by a constant 0, or shifts by 32 or more")]
    Constant { index: usize },
    #[error(
        "instruction {index}: loads the kernel's ancillary data (a live socket's), which a \
         stored frame does not carry"
    )]
    Ancillary { index: usize },
    #[error("the program does not end with a return")]
    NoReturn,
    #[error("{0} instructions; a program has 1 to {BPF_INSTRUCTIONS_MAX}")]
    Length(usize),
}

/// A checked classic BPF program, run on packets in user space.
#[derive(Debug, Clone)]
pub struct BpfFilter {
    program: Vec<BpfInstruction>,
}

impl BpfFilter {
    /// Checks `program` once, so that running it never fails: see the module's doc.
    pub fn new(program: Vec<BpfInstruction>) -> Result<BpfFilter, BpfError> {
        if program.is_empty() || program.len() > BPF_INSTRUCTIONS_MAX {
            return Err(BpfError::Length(program.len()));
        }
        for (index, instruction) in program.iter().enumerate() {
            check(index, instruction, program.len())?;
        }
        if program
            .last()
            .is_some_and(|last| last.code & 0x07 != op::RET)
        {
            return Err(BpfError::NoReturn);
        }
        Ok(BpfFilter { program })
    }

    /// Whether the program keeps a packet: `data` the bytes stored, `wire_len` its length
    /// as received (what `len` loads).
    pub fn accepts(&self, data: &[u8], wire_len: u32) -> bool {
        self.run(data, wire_len) != 0
    }

    /// Runs the program: the bytes of the packet it keeps, 0 when it rejects it.
    pub fn run(&self, data: &[u8], wire_len: u32) -> u32 {
        let (mut a, mut x) = (0u32, 0u32);
        let mut memory = [0u32; MEMORY_WORDS as usize];
        let mut pc = 0usize;
        loop {
            let BpfInstruction { code, jt, jf, k } = self.program[pc];
            pc += 1;
            match code & 0x07 {
                op::LD | op::LDX => {
                    let Some(value) = load(code, k, x, data, wire_len, &memory) else {
                        return 0;
                    };
                    if code & 0x07 == op::LD {
                        a = value;
                    } else {
                        x = value;
                    }
                }
                op::ST => memory[k as usize] = a,
                op::STX => memory[k as usize] = x,
                op::ALU => {
                    let operand = if code & op::X != 0 { x } else { k };
                    match alu(code & 0xf0, a, operand) {
                        Some(value) => a = value,
                        None => return 0,
                    }
                }
                op::JMP => pc += jump(code, k, jt, jf, a, x),
                op::RET => {
                    return match code & 0x18 {
                        op::RET_A => a,
                        op::X => x,
                        _ => k,
                    }
                }
                _ if code & op::TXA != 0 => a = x,
                _ => x = a,
            }
        }
    }
}

/// What a load instruction reads (`None`: past the bytes stored, which rejects the packet).
fn load(code: u16, k: u32, x: u32, data: &[u8], wire_len: u32, memory: &[u32]) -> Option<u32> {
    let size = code & 0x18;
    match code & 0xe0 {
        op::IMM => Some(k),
        op::LEN => Some(wire_len),
        op::MEM => Some(memory[k as usize]),
        op::ABS => read(data, k, size),
        op::IND => read(data, x.checked_add(k)?, size),
        // MSH: four times the low nibble of a byte (an IPv4 header's length).
        _ => read(data, k, op::B).map(|byte| (byte & 0xf) * 4),
    }
}

fn read(data: &[u8], offset: u32, size: u16) -> Option<u32> {
    let at = offset as usize;
    let len = match size {
        op::W => 4,
        op::H => 2,
        _ => 1,
    };
    let bytes = data.get(at..at.checked_add(len)?)?;
    Some(
        bytes
            .iter()
            .fold(0u32, |value, &byte| value << 8 | u32::from(byte)),
    )
}

fn alu(operation: u16, a: u32, operand: u32) -> Option<u32> {
    Some(match operation {
        0x00 => a.wrapping_add(operand),
        0x10 => a.wrapping_sub(operand),
        0x20 => a.wrapping_mul(operand),
        0x30 => a.checked_div(operand)?,
        0x40 => a | operand,
        0x50 => a & operand,
        0x60 => a.checked_shl(operand).unwrap_or(0),
        0x70 => a.checked_shr(operand).unwrap_or(0),
        0x80 => a.wrapping_neg(),
        0x90 => a.checked_rem(operand)?,
        _ => a ^ operand,
    })
}

/// How many instructions a jump skips.
fn jump(code: u16, k: u32, jt: u8, jf: u8, a: u32, x: u32) -> usize {
    let operand = if code & op::X != 0 { x } else { k };
    let taken = match code & 0xf0 {
        0x00 => return k as usize,
        0x10 => a == operand,
        0x20 => a > operand,
        0x30 => a >= operand,
        _ => a & operand != 0,
    };
    usize::from(if taken { jt } else { jf })
}

/// Checks one instruction of a program of `len`: see [`BpfFilter::new`].
fn check(index: usize, instruction: &BpfInstruction, len: usize) -> Result<(), BpfError> {
    let BpfInstruction { code, jt, jf, k } = *instruction;
    let opcode = Err(BpfError::Opcode { index, code });
    if code & 0xff00 != 0 {
        return opcode;
    }
    let memory = if k < MEMORY_WORDS {
        Ok(())
    } else {
        Err(BpfError::Memory { index, k })
    };
    let lands = |offset: usize| index + 1 + offset < len;
    let (operation, by_x) = (code & 0xf0, code & op::X != 0);
    match code & 0x07 {
        op::LD | op::LDX => {
            let (size, mode) = (code & 0x18, code & 0xe0);
            let known = match (code & 0x07, mode) {
                (_, op::IMM | op::MEM | op::LEN) => size == op::W,
                (op::LD, op::ABS | op::IND) => size != 0x18,
                (op::LDX, op::MSH) => size == op::B,
                _ => false,
            };
            if !known {
                return opcode;
            }
            if mode == op::MEM {
                memory?;
            }
            if matches!(mode, op::ABS | op::MSH) && k >= op::ANCILLARY_K {
                return Err(BpfError::Ancillary { index });
            }
        }
        op::ST | op::STX if code & 0xf8 == 0 => memory?,
        op::ALU if operation <= 0xa0 && !(operation == 0x80 && by_x) => {
            let zero_divisor = matches!(operation, 0x30 | 0x90) && k == 0;
            let wide_shift = matches!(operation, 0x60 | 0x70) && k >= 32;
            if !by_x && (zero_divisor || wide_shift) {
                return Err(BpfError::Constant { index });
            }
        }
        op::JMP if operation <= 0x40 && !(operation == 0 && by_x) => {
            let fits = if operation == 0 {
                usize::try_from(k).is_ok_and(lands)
            } else {
                lands(usize::from(jt)) && lands(usize::from(jf))
            };
            if !fits {
                return Err(BpfError::Jump { index });
            }
        }
        op::RET if code & 0xe0 == 0 && code & 0x18 != 0x18 => {}
        op::MISC if code == op::MISC || code == op::MISC | op::TXA => {}
        _ => return opcode,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bpf_programs_are_read_as_tcpdump_prints_them_and_refused_otherwise() {
        let program =
            parse_bpf_program("4\n128 0 0 0\n37 0 1 1000\n6 0 0 262144\n6 0 0 0\n").unwrap();
        assert_eq!(program.len(), 4);
        assert_eq!(
            program[1],
            BpfInstruction {
                code: 37,
                jt: 0,
                jf: 1,
                k: 1000
            }
        );
        // A negative k (tcpdump prints some as signed) is its two's complement.
        assert_eq!(parse_bpf_program("1\n6 0 0 -1").unwrap()[0].k, u32::MAX);
        let not_instruction = |line: usize, text: &str| BpfTextError::NotAnInstruction {
            line,
            text: text.into(),
        };
        for (bad, why) in [
            ("", BpfTextError::Empty),
            ("x", BpfTextError::NotACount("x".into())),
            ("0", BpfTextError::CountOutOfRange(0)),
            (
                "2\n6 0 0 0",
                BpfTextError::CountMismatch { said: 2, found: 1 },
            ),
            ("1\n6 0 0", not_instruction(2, "6 0 0")),
            ("1\n6 0 0 0 0", not_instruction(2, "6 0 0 0 0")),
            ("1\n6 0 300 0", not_instruction(2, "6 0 300 0")),
            (
                "2\n6 0 0 0\n\n6 0 0 99999999999",
                not_instruction(3, "6 0 0 99999999999"),
            ),
            ("5000\n6 0 0 0", BpfTextError::CountOutOfRange(5000)),
        ] {
            assert_eq!(parse_bpf_program(bad), Err(why), "{bad:?}");
        }
    }

    #[test]
    fn a_program_reads_as_a_list_too() {
        let text = "4\n128 0 0 0\n37 0 1 1000\n6 0 0 262144\n6 0 0 0\n";
        let list = "[[128, 0, 0, 0], [37, 0, 1, 1000],\n [6, 0, 0, 262144], [6, 0, 0, 0]]";
        assert_eq!(parse_bpf_program(list), parse_bpf_program(text));
        assert_eq!(parse_bpf_program("[[6,0,0,-1]]").unwrap()[0].k, u32::MAX);
        for (bad, why) in [
            ("[]", BpfTextError::ListLength(0)),
            ("[[6,0,0]]", BpfTextError::NotAListItem(0)),
            ("[[6,0,0,0] [6,0,0,0]]", BpfTextError::NotAListItem(0)),
            ("[[6,0,0,0],", BpfTextError::NotAList),
            ("[[6,0,0,0],[6,0,0,0],[6]]", BpfTextError::NotAListItem(2)),
        ] {
            assert_eq!(parse_bpf_program(bad), Err(why), "{bad:?}");
        }
    }

    /// `tcpdump -ddd 'udp port 5000'` (Ethernet): IPv4 and IPv6, either port.
    const UDP_PORT_5000: &str = "20\n40 0 0 12\n21 0 6 34525\n48 0 0 20\n21 0 15 17\n\
        40 0 0 54\n21 12 0 5000\n40 0 0 56\n21 10 11 5000\n21 0 10 2048\n48 0 0 23\n\
        21 0 8 17\n40 0 0 20\n69 6 0 8191\n177 0 0 14\n72 0 0 14\n21 2 0 5000\n\
        72 0 0 16\n21 0 1 5000\n6 0 0 262144\n6 0 0 0\n";

    /// An Ethernet frame with an IPv4 header of `ihl` words, then UDP between two ports.
    fn udp_frame(source_port: u16, destination_port: u16, ihl: u8, fragment: u16) -> Vec<u8> {
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0u8; usize::from(ihl) * 4];
        ip[0] = 0x40 | ihl;
        ip[6..8].copy_from_slice(&fragment.to_be_bytes());
        ip[9] = 17;
        frame.extend_from_slice(&ip);
        frame.extend_from_slice(&source_port.to_be_bytes());
        frame.extend_from_slice(&destination_port.to_be_bytes());
        frame.extend_from_slice(&[0, 12, 0, 0, 1, 2, 3, 4]);
        frame
    }

    #[test]
    fn tcpdumps_udp_port_program_keeps_that_port_only() {
        let filter = BpfFilter::new(parse_bpf_program(UDP_PORT_5000).unwrap()).unwrap();
        let keeps = |frame: &[u8]| filter.accepts(frame, frame.len() as u32);
        assert!(keeps(&udp_frame(5000, 9, 5, 0)));
        assert!(keeps(&udp_frame(9, 5000, 5, 0)));
        assert!(
            keeps(&udp_frame(9, 5000, 7, 0)),
            "options: the header length from MSH"
        );
        assert!(!keeps(&udp_frame(9, 5001, 5, 0)));
        assert!(
            !keeps(&udp_frame(9, 5000, 5, 100)),
            "a later fragment has no ports"
        );
        let mut tcp = udp_frame(5000, 5000, 5, 0);
        tcp[14 + 9] = 6;
        assert!(!keeps(&tcp));
        assert_eq!(filter.run(&udp_frame(5000, 1, 5, 0), 64), 262144);
        // Cut short before the ports: a load past the bytes kept rejects.
        assert!(!keeps(&udp_frame(5000, 1, 5, 0)[..30]));
        assert!(!keeps(&[]));
    }

    #[test]
    fn arithmetic_memory_and_len_work_as_the_kernel_does() {
        let program = |text: &str| BpfFilter::new(parse_bpf_program(text).unwrap());
        // A = len * 3 - 1; M[2] = A; X = M[2]; A = X / 2; return A.
        let filter = program(
            "8\n128 0 0 0\n36 0 0 3\n20 0 0 1\n2 0 0 2\n97 0 0 2\n135 0 0 0\n52 0 0 2\n22 0 0 0",
        )
        .unwrap();
        assert_eq!(filter.run(&[], 100), 149);
        // A / X with X = 0 rejects the packet.
        let divide = program("3\n0 0 0 7\n60 0 0 0\n22 0 0 0").unwrap();
        assert_eq!(divide.run(&[], 1), 0);
        // A jump over one instruction.
        let jump = program("3\n5 0 0 1\n6 0 0 0\n6 0 0 9").unwrap();
        assert_eq!(jump.run(&[], 1), 9);
    }

    #[test]
    fn programs_that_cannot_run_are_refused_before_any_packet() {
        let refused = |text: &str| BpfFilter::new(parse_bpf_program(text).unwrap()).unwrap_err();
        assert_eq!(refused("1\n0 0 0 0"), BpfError::NoReturn);
        assert_eq!(refused("2\n21 1 0 0\n6 0 0 0"), BpfError::Jump { index: 0 });
        assert_eq!(refused("2\n5 0 0 1\n6 0 0 0"), BpfError::Jump { index: 0 });
        assert_eq!(
            refused("2\n2 0 0 16\n6 0 0 0"),
            BpfError::Memory { index: 0, k: 16 }
        );
        assert_eq!(
            refused("2\n52 0 0 0\n6 0 0 0"),
            BpfError::Constant { index: 0 }
        );
        assert_eq!(
            refused("2\n100 0 0 32\n6 0 0 0"),
            BpfError::Constant { index: 0 }
        );
        assert_eq!(
            refused("2\n40 0 0 4294963244\n6 0 0 0"),
            BpfError::Ancillary { index: 0 }
        );
        assert_eq!(
            refused("2\n255 0 0 0\n6 0 0 0"),
            BpfError::Opcode {
                index: 0,
                code: 255
            }
        );
    }
}
