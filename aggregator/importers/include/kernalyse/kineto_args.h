// The Kineto (PyTorch profiler) event argument names kernalyse reads and writes, one table: the
// importer (kineto.cpp) matches them, the Kineto export (export.cpp) and kernalyse-tracegen write
// them. The names are PyTorch's and kineto's (torch/csrc/autograd/profiler_kineto.cpp,
// libkineto/src/output_json.cpp); a rename there is one line here. char arrays, not string_views:
// the importer's key_is compares a key of constant length inline.
#pragma once

#include <string_view>

namespace kernalyse::kineto_arg {

// Every event's correlation with its launch and op.
inline constexpr char kExternalId[] = "External id";
inline constexpr char kCorrelation[] = "correlation";
inline constexpr char kDevice[] = "device";
inline constexpr char kStream[] = "stream";
// record_shapes=True: an op's inputs.
inline constexpr char kInputDims[] = "Input Dims";
inline constexpr char kInputType[] = "Input type";
inline constexpr char kConcreteInputs[] = "Concrete Inputs";
// NCCL collectives (ParamCommsUtils): on the kernel and on record_param_comms.
inline constexpr char kCollectiveName[] = "Collective name";
inline constexpr char kInMsgNelems[] = "In msg nelems";
inline constexpr char kOutMsgNelems[] = "Out msg nelems";
inline constexpr char kInMsgSize[] = "In msg size";
inline constexpr char kOutMsgSize[] = "Out msg size";
inline constexpr char kGroupSize[] = "Group size";
inline constexpr char kDtype[] = "dtype";
inline constexpr char kInSplitSize[] = "In split size";
inline constexpr char kOutSplitSize[] = "Out split size";
inline constexpr char kPgName[] = "Process Group Name";
inline constexpr char kPgDesc[] = "Process Group Description";
inline constexpr char kPgRanks[] = "Process Group Ranks";
inline constexpr char kSeq[] = "Seq";
inline constexpr char kSeqOld[] = "seq";  // the spelling of older PyTorch releases
inline constexpr char kCommsId[] = "Comms Id";
// profile_memory=True: "[memory]" instant events.
inline constexpr char kDeviceType[] = "Device Type";
inline constexpr char kDeviceId[] = "Device Id";
inline constexpr char kBytes[] = "Bytes";
inline constexpr char kTotalAllocated[] = "Total Allocated";

// The whole vocabulary, for checks (tests/unit: every name once).
inline constexpr std::string_view kAll[] = {
    kExternalId,    kCorrelation,    kDevice,         kStream,      kInputDims,
    kInputType,     kConcreteInputs, kCollectiveName, kInMsgNelems, kOutMsgNelems,
    kInMsgSize,     kOutMsgSize,     kGroupSize,      kDtype,       kInSplitSize,
    kOutSplitSize,  kPgName,         kPgDesc,         kPgRanks,     kSeq,
    kSeqOld,        kCommsId,        kDeviceType,     kDeviceId,    kBytes,
    kTotalAllocated};

}  // namespace kernalyse::kineto_arg
