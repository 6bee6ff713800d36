# A static i386 program with a known answer for the compat ABI: 1,000 getppid calls through
# `int $0x80`, then exit(7). Built by the test with binutils (`as --32`, `ld -m elf_i386`), so
# it needs no 32-bit C library.
    .globl _start
    .text
_start:
    mov $1000, %esi
1:  mov $64, %eax        # getppid (arch/x86/entry/syscalls/syscall_32.tbl)
    int $0x80
    dec %esi
    jnz 1b
    mov $1, %eax         # exit
    mov $7, %ebx
    int $0x80
