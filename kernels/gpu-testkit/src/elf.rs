//! Just enough ELF reading to check a code object: the machine (`EM_AMDGPU`), the
//! target ISA (`e_flags & EF_AMDGPU_MACH`) and the names in its symbol tables.

/// `EM_AMDGPU`.
const EM_AMDGPU: u16 = 224;
/// `EF_AMDGPU_MACH`: the low byte of `e_flags`.
const EF_AMDGPU_MACH: u32 = 0xff;

/// What a code object says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElfInfo {
    /// `e_flags & EF_AMDGPU_MACH`.
    pub mach: u32,
    /// The target this `mach` value stands for, where known.
    pub target: Option<&'static str>,
    /// Names in `.symtab` and `.dynsym` (kernels appear as `name` and `name.kd`).
    pub symbols: Vec<String>,
}

impl ElfInfo {
    /// Whether a kernel of that name is defined (its descriptor `name.kd` is present).
    pub fn has_kernel(&self, name: &str) -> bool {
        let kd = format!("{name}.kd");
        self.symbols.contains(&kd)
    }
}

/// `EF_AMDGPU_MACH_AMDGCN_*` values of LLVM's `ELF.h`, each checked against a code
/// object hipcc 5.2.3 built for that target.
const MACHS: &[(&str, u32)] = &[
    ("gfx900", 0x2c),
    ("gfx906", 0x2f),
    ("gfx908", 0x30),
    ("gfx90a", 0x3f),
    ("gfx1010", 0x33),
    ("gfx1030", 0x36),
];

/// The `EF_AMDGPU_MACH` value of `target`, where this crate knows it.
pub fn mach_of(target: &str) -> Option<u32> {
    MACHS.iter().find(|(t, _)| *t == target).map(|&(_, m)| m)
}

fn u16_at(b: &[u8], off: usize) -> Result<u16, String> {
    b.get(off..off + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .ok_or_else(|| format!("truncated at byte {off}"))
}

fn u32_at(b: &[u8], off: usize) -> Result<u32, String> {
    b.get(off..off + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| format!("truncated at byte {off}"))
}

fn u64_at(b: &[u8], off: usize) -> Result<usize, String> {
    let v = b
        .get(off..off + 8)
        .map(|s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
        .ok_or_else(|| format!("truncated at byte {off}"))?;
    usize::try_from(v).map_err(|_| format!("offset {v} does not fit"))
}

/// Read a code object's header and symbol names. Errors name what is wrong.
pub fn inspect(bytes: &[u8]) -> Result<ElfInfo, String> {
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        return Err("not an ELF file (a clang offload bundle? build with \
                    --no-gpu-bundle-output)"
            .to_string());
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        return Err("not a 64-bit little-endian ELF".to_string());
    }
    let machine = u16_at(bytes, 18)?;
    if machine != EM_AMDGPU {
        return Err(format!("e_machine {machine}, not EM_AMDGPU ({EM_AMDGPU})"));
    }
    let mach = u32_at(bytes, 48)? & EF_AMDGPU_MACH;
    let shoff = u64_at(bytes, 40)?;
    let shentsize = u16_at(bytes, 58)? as usize;
    let shnum = u16_at(bytes, 60)? as usize;
    if shentsize < 64 {
        return Err(format!("section header size {shentsize}"));
    }
    let section = |i: usize| -> Result<(u32, usize, usize, usize, usize), String> {
        let h = shoff + i * shentsize;
        // (sh_type, sh_offset, sh_size, sh_link, sh_entsize)
        Ok((
            u32_at(bytes, h + 4)?,
            u64_at(bytes, h + 24)?,
            u64_at(bytes, h + 32)?,
            u32_at(bytes, h + 40)? as usize,
            u64_at(bytes, h + 56)?,
        ))
    };
    let mut symbols = Vec::new();
    for i in 0..shnum {
        let (ty, off, size, link, entsize) = section(i)?;
        // SHT_SYMTAB = 2, SHT_DYNSYM = 11.
        if ty != 2 && ty != 11 {
            continue;
        }
        if entsize < 24 || link >= shnum {
            return Err(format!("section {i}: bad symbol table (entsize {entsize}, link {link})"));
        }
        let (_, str_off, str_size, _, _) = section(link)?;
        let strtab = bytes
            .get(str_off..str_off + str_size)
            .ok_or_else(|| format!("section {link}: string table out of bounds"))?;
        for s in 0..size / entsize {
            let name_off = u32_at(bytes, off + s * entsize)? as usize;
            let Some(rest) = strtab.get(name_off..) else {
                return Err(format!("symbol {s}: name offset {name_off} out of bounds"));
            };
            let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
            if end > 0 {
                symbols.push(String::from_utf8_lossy(&rest[..end]).into_owned());
            }
        }
    }
    let target = MACHS.iter().find(|(_, m)| *m == mach).map(|&(t, _)| t);
    Ok(ElfInfo { mach, target, symbols })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_an_amdgpu_elf() {
        assert!(inspect(b"").unwrap_err().contains("not an ELF"));
        let mut bundle = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
        bundle.resize(128, 0);
        assert!(inspect(&bundle).unwrap_err().contains("bundle"));
        // A 64-bit little-endian ELF header for x86-64 (e_machine 62).
        let mut x86 = vec![0u8; 64];
        x86[..4].copy_from_slice(b"\x7fELF");
        x86[4] = 2;
        x86[5] = 1;
        x86[18] = 62;
        assert!(inspect(&x86).unwrap_err().contains("not EM_AMDGPU"));
        // Truncated section headers.
        let mut amd = x86.clone();
        amd[18] = 224;
        amd[40] = 200; // e_shoff past the end
        amd[58] = 64;
        amd[60] = 1;
        assert!(inspect(&amd).unwrap_err().contains("truncated"));
    }

    #[test]
    fn mach_table_round_trips() {
        for &(t, m) in MACHS {
            assert_eq!(mach_of(t), Some(m));
        }
        assert_eq!(mach_of("gfx9999"), None);
    }
}
