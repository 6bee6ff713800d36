//! Typed access to BPF maps from user space: arrays, counters (an array of `u64` read through
//! a mapping when it is mmapable), per-CPU arrays (a value per possible CPU, each padded to 8
//! bytes, as the kernel copies them) and hashes (walked key by key).
//! Values are plain `repr(C)` structs marked [`Pod`]. Must not create maps (`loader`) or know
//! ste's map names.

use super::ringbuf::Mapping;
use super::sys::{self, MapDef};
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// A plain-data type whose bytes can be copied to and from a map.
///
/// # Safety
/// `repr(C)` (or a primitive integer), with no padding bytes, and valid for any bit pattern.
pub unsafe trait Pod: Copy + 'static {}

// SAFETY: primitive integers have no padding and accept any bit pattern.
unsafe impl Pod for u32 {}
// SAFETY: as above.
unsafe impl Pod for i32 {}
// SAFETY: as above.
unsafe impl Pod for u64 {}

fn bytes_of<T: Pod>(v: &T) -> &[u8] {
    // SAFETY: `T: Pod` has no padding, so all its size_of bytes are initialized.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// A `T` from the first `size_of::<T>()` bytes of `b` (which the caller sized).
fn from_bytes<T: Pod>(b: &[u8]) -> T {
    assert!(b.len() >= std::mem::size_of::<T>(), "short map value");
    // SAFETY: `b` holds at least size_of::<T>() bytes (checked) and `T: Pod` accepts any bit
    // pattern; read_unaligned does not need `b` aligned.
    unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<T>()) }
}

/// A created map: its descriptor and definition.
#[derive(Debug)]
pub struct Map {
    pub name: String,
    pub def: MapDef,
    fd: OwnedFd,
}

impl AsFd for Map {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Map {
    pub fn new(name: String, def: MapDef, fd: OwnedFd) -> Map {
        Map { name, def, fd }
    }

    /// A second handle on the same kernel map.
    pub fn try_clone(&self) -> io::Result<Map> {
        Ok(Map {
            name: self.name.clone(),
            def: self.def.clone(),
            fd: self.fd.try_clone()?,
        })
    }

    fn check<K, V>(&self, types: &[u32], per_value: usize) -> io::Result<()> {
        let (k, v) = (std::mem::size_of::<K>(), std::mem::size_of::<V>());
        if !types.contains(&self.def.map_type)
            || self.def.key_size as usize != k
            || self.def.value_size as usize != v * per_value
        {
            return Err(io::Error::other(format!(
                "BPF map `{}` (type {}, key {} bytes, value {} bytes) is not the expected type {types:?} with a {k}-byte key and a {v}-byte value",
                self.name, self.def.map_type, self.def.key_size, self.def.value_size
            )));
        }
        Ok(())
    }
}

/// An array map of `V`.
pub struct Array<V> {
    map: Map,
    _v: PhantomData<V>,
}

impl<V: Pod> Array<V> {
    pub fn new(map: Map) -> io::Result<Array<V>> {
        map.check::<u32, V>(&[sys::MAP_ARRAY], 1)?;
        Ok(Array {
            map,
            _v: PhantomData,
        })
    }

    pub fn get(&self, i: u32) -> io::Result<V> {
        let mut value = vec![0u8; std::mem::size_of::<V>()];
        if !sys::map_lookup(self.map.as_fd(), bytes_of(&i), &mut value)? {
            return Err(io::Error::other(format!(
                "index {i} is out of the array `{}`",
                self.map.name
            )));
        }
        Ok(from_bytes(&value))
    }

    pub fn set(&self, i: u32, v: &V) -> io::Result<()> {
        sys::map_update(self.map.as_fd(), bytes_of(&i), bytes_of(v), 0)
    }
}

/// An array of `u64` counters the programs add to atomically, read through a mapping of its
/// values when the map was created mmapable (`BPF_F_MMAPABLE`): a read is then a load, where
/// a lookup is a system call (the ebpf reader reads its loss counters at nearly every drain).
/// Written with a system call: the mapping is read-only.
pub struct Counters {
    array: Array<u64>,
    mapped: Option<Mapping>,
}

// SAFETY: the mapping is only read, through atomics, and lives as long as the value.
unsafe impl Send for Counters {}
// SAFETY: as above.
unsafe impl Sync for Counters {}

impl Counters {
    pub fn new(map: Map) -> io::Result<Counters> {
        let mapped = if map.def.flags & sys::MAP_F_MMAPABLE != 0 {
            let len = map.def.max_entries as usize * std::mem::size_of::<u64>();
            Some(Mapping::new(map.as_fd(), len, libc::PROT_READ, 0)?)
        } else {
            None
        };
        Ok(Counters {
            array: Array::new(map)?,
            mapped,
        })
    }

    /// Whether reads are loads from the mapping.
    pub fn is_mapped(&self) -> bool {
        self.mapped.is_some()
    }

    pub fn get(&self, i: u32) -> io::Result<u64> {
        let Some(m) = &self.mapped else {
            return self.array.get(i);
        };
        if i >= self.array.map.def.max_entries {
            return Err(io::Error::other(format!(
                "index {i} is out of the array `{}`",
                self.array.map.name
            )));
        }
        // SAFETY: the mapping holds `max_entries` 8-byte values (checked above), page-aligned,
        // which the programs change only with atomic adds.
        let v = unsafe { &*(m.ptr as *const AtomicU64).add(i as usize) };
        Ok(v.load(Ordering::Acquire))
    }

    pub fn set(&self, i: u32, v: u64) -> io::Result<()> {
        self.array.set(i, &v)
    }
}

/// A per-CPU array map of `V`: a value for each possible CPU.
pub struct PerCpuArray<V> {
    map: Map,
    cpus: usize,
    _v: PhantomData<V>,
}

/// The bytes the kernel copies for one CPU's value.
fn stride(size: usize) -> usize {
    size.div_ceil(8) * 8
}

/// The values of each CPU in a per-CPU lookup's buffer.
fn per_cpu_values<V: Pod>(buf: &[u8], cpus: usize) -> Vec<V> {
    let s = stride(std::mem::size_of::<V>());
    (0..cpus).map(|c| from_bytes(&buf[c * s..])).collect()
}

impl<V: Pod> PerCpuArray<V> {
    pub fn new(map: Map) -> io::Result<PerCpuArray<V>> {
        map.check::<u32, V>(&[sys::MAP_PERCPU_ARRAY], 1)?;
        Ok(PerCpuArray {
            map,
            cpus: sys::possible_cpus()? as usize,
            _v: PhantomData,
        })
    }

    pub fn get(&self, i: u32) -> io::Result<Vec<V>> {
        let mut buf = vec![0u8; stride(std::mem::size_of::<V>()) * self.cpus];
        if !sys::map_lookup(self.map.as_fd(), bytes_of(&i), &mut buf)? {
            return Err(io::Error::other(format!(
                "index {i} is out of the array `{}`",
                self.map.name
            )));
        }
        Ok(per_cpu_values(&buf, self.cpus))
    }
}

/// A hash map from `K` to `V`.
pub struct Hash<K, V> {
    map: Map,
    _kv: PhantomData<(K, V)>,
}

impl<K: Pod, V: Pod> Hash<K, V> {
    pub fn new(map: Map) -> io::Result<Hash<K, V>> {
        map.check::<K, V>(&[sys::MAP_HASH], 1)?;
        Ok(Hash {
            map,
            _kv: PhantomData,
        })
    }

    /// Every entry; an error ends the walk. An entry deleted during the walk is skipped.
    pub fn iter(&self) -> impl Iterator<Item = io::Result<(K, V)>> + '_ {
        let ks = std::mem::size_of::<K>();
        let mut key: Option<Vec<u8>> = None;
        let mut done = false;
        std::iter::from_fn(move || {
            while !done {
                let mut next = vec![0u8; ks];
                match sys::map_next_key(self.map.as_fd(), key.as_deref(), &mut next) {
                    Ok(true) => {}
                    Ok(false) => {
                        done = true;
                        return None;
                    }
                    Err(e) => {
                        done = true;
                        return Some(Err(e));
                    }
                }
                let mut value = vec![0u8; std::mem::size_of::<V>()];
                let found = sys::map_lookup(self.map.as_fd(), &next, &mut value);
                let k = from_bytes::<K>(&next);
                key = Some(next);
                match found {
                    Ok(true) => return Some(Ok((k, from_bytes(&value)))),
                    Ok(false) => continue,
                    Err(e) => {
                        done = true;
                        return Some(Err(e));
                    }
                }
            }
            None
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Three {
        a: u64,
        b: u32,
        c: u32,
        d: u32,
        e: u32,
        f: u32,
        g: u32,
    }

    // SAFETY: repr(C) integers, no padding (32 bytes).
    unsafe impl Pod for Three {}

    #[test]
    fn per_cpu_values_are_padded_to_eight_bytes() {
        assert_eq!(stride(12), 16);
        assert_eq!(stride(32), 32);
        // Two CPUs of a 4-byte value: each in 8 bytes.
        let mut buf = vec![0u8; 16];
        buf[0..4].copy_from_slice(&7u32.to_ne_bytes());
        buf[8..12].copy_from_slice(&9u32.to_ne_bytes());
        assert_eq!(per_cpu_values::<u32>(&buf, 2), vec![7, 9]);
        let v = Three {
            a: 1,
            b: 2,
            c: 3,
            d: 4,
            e: 5,
            f: 6,
            g: 7,
        };
        let mut buf = bytes_of(&v).to_vec();
        buf.extend_from_slice(bytes_of(&v));
        assert_eq!(per_cpu_values::<Three>(&buf, 2), vec![v, v]);
    }

    /// Counters of an mmapable array are read from the mapping (what the kernel holds, as a
    /// lookup gives it); of a plain one, by lookups.
    #[test]
    #[cfg_attr(not(ste_test_root), ignore = "needs root: creates BPF maps")]
    fn counters_of_an_mmapable_array_are_read_through_the_mapping() {
        for flags in [sys::MAP_F_MMAPABLE, 0] {
            let def = MapDef {
                map_type: sys::MAP_ARRAY,
                key_size: 4,
                value_size: 8,
                max_entries: 7,
                flags,
            };
            let fd = sys::map_create("test_counters", &def, None).unwrap();
            let c = Counters::new(Map::new("test_counters".into(), def, fd)).unwrap();
            assert_eq!(c.is_mapped(), flags != 0);
            assert_eq!(c.get(6).unwrap(), 0);
            c.set(6, 41).unwrap();
            c.set(0, 3).unwrap();
            assert_eq!((c.get(6).unwrap(), c.get(0).unwrap()), (41, 3));
            assert_eq!(c.array.get(6).unwrap(), 41, "a lookup says the same");
            assert!(c.get(7).is_err(), "past the end");
        }
    }
}
