// Facts about the machine and the build a figure was measured on, recorded with every report.
// CPU model, kernel, host name and memory come from common/sysinfo.h; the rest (OS, cores,
// affinity, SIMD, caches, governor, huge pages, load, the target's file system and block device,
// the GPU) is read here from /proc, /sys and nvidia-smi.
#ifndef GRIST_BENCH_MACHINE_H_
#define GRIST_BENCH_MACHINE_H_

#include <string>

namespace grist::bench {

// Facts about this machine and build, as a JSON object: OS, kernel, CPU model, logical and
// physical cores, the CPUs this process may use (affinity), SIMD level, L3 size, frequency
// governor, memory total and available, transparent huge pages, load average at the time; the file
// system type, mount point, mount options, free space and block device (model, rotational, I/O
// scheduler) of `target_dir`; GPU, driver and memory when nvidia-smi answers; grist's version,
// git commit, build type, compiler, flags and CUDA support; the UTC time and the command line.
std::string EnvironmentJson(const std::string& target_dir);

// One Markdown paragraph of the same facts (host, CPU, memory, OS, kernel, the target's file
// system, grist's version and build, the time), for the end of a report's Markdown file.
std::string EnvironmentMarkdown(const std::string& target_dir);

}  // namespace grist::bench

#endif  // GRIST_BENCH_MACHINE_H_
