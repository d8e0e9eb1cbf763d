import CBytes

/// Where glibc's allocator puts large blocks. It starts by giving each block of 128 KiB or
/// more a mapping of its own, unmapped when freed; but once such a block is freed it raises
/// that threshold to the block's size (up to 32 MiB), so after confabd has read a long log
/// into one array, the arrays of a few MiB that follow come from the heap, and what is freed
/// there stays in the process. Fixing the threshold keeps large blocks mapped and returned:
/// a 20,000-message conversation attached and idle went from 20.2 to 15.4 MiB (docs/performance.md).
public enum LargeAllocations {
    /// Blocks of `bytes` or more get a mapping of their own, whatever was freed before.
    /// False if the allocator refused.
    @discardableResult
    public static func alwaysMapped(from bytes: Int32 = 128 << 10) -> Bool {
        cbytes_mmap_threshold(bytes) == 1
    }
}
