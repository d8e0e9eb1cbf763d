import CBytes

/// Where glibc's allocator puts large blocks, and when it gives freed memory back.
///
/// It starts by giving each block of 128 KiB or more a mapping of its own, unmapped when freed;
/// but once such a block is freed it raises that threshold to the block's size (up to 32 MiB),
/// so after confabd has read a long log into one array, the arrays of a few MiB that follow
/// come from the heap, and what is freed there stays in the process. `mappedOnTheirOwn` fixes
/// the threshold. For a burst of large answers, where mapping and faulting in each block anew
/// is most of the cost, `reusedInBursts` lets blocks of a few MiB come from the heap and stay
/// there freed, until `mappedOnTheirOwn` and `returnFreed` end the burst.
public enum LargeAllocations {
    /// Blocks of 128 KiB or more get a mapping of their own, whatever was freed before, and
    /// the heap gives back what is freed at its top beyond 128 KiB. False if glibc refused.
    @discardableResult
    public static func mappedOnTheirOwn() -> Bool {
        cbytes_malloc_thresholds(128 << 10, 128 << 10) == 1
    }

    /// Blocks under 4 MiB come from the heap, and up to 64 MiB freed at its top stays for reuse.
    @discardableResult
    public static func reusedInBursts() -> Bool {
        cbytes_malloc_thresholds(4 << 20, 64 << 20) == 1
    }

    /// Gives every free page of the heaps back to the system (`malloc_trim`): milliseconds at
    /// most on a heap of tens of MiB, for the quiet after a burst.
    public static func returnFreed() {
        _ = cbytes_malloc_trim()
    }
}
