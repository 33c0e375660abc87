# The fatbin nvcc built, in a section named like MSVC builds name it (.nv_fatbin, cut to 8 characters on disk).
.section .nv_fatbin,"dr"
.p2align 3
.globl cudatrace_example_fatbin
cudatrace_example_fatbin:
.incbin "kernels.fatbin"
