# binutils before 2.42 neither terminates the delay-import descriptor array nor fills the Delay Import data
# directory; this zeroed block sorts right after the descriptor (.text$2) and build_pe_examples.sh sets the
# directory, as MSVC's link.exe does.
.section .text$2zzz,"xr"
.globl cudatrace_delay_end
cudatrace_delay_end:
.space 64
