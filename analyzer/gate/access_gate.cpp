// The access gate: an LLVM pass plugin that `locksuit cc` loads into clang
// (-fpass-plugin) in place of -fsanitize-coverage=trace-loads,trace-stores.
//
// Like that option, it gives the shim the address of every load and store
// of 1, 2, 4, 8 or 16 bytes, through the same callbacks
// (__sanitizer_cov_load8(address), __sanitizer_cov_store4(address), ...).
// Unlike it, the call sits behind an inline test of two thread-local words:
//
//     if (__locksuit_gate_calls != __locksuit_gate_skip_loads)
//         __sanitizer_cov_load8(address);
//     if (~__locksuit_gate_calls != __locksuit_gate_skip_stores)
//         __sanitizer_cov_store8(address);
//
// (stores compare the complement, so that a thread's zeroed words, in the
// shim, leave its stores open from its first instruction),
// The shim owns the words (its recorder call count, and the count at which
// it last said it needs no more calls; see shim/src/recorder/tables/thread_state.rs),
// so a thread holding no lock makes no call for its loads, and a program
// run without the shim (liblocksuit_cov.so's words are zero) makes none at
// all. The test reads the words and nothing of the program's: the access
// itself, its atomicity and ordering stay exactly as compiled.
//
// Some accesses are left out: see `accesses_of`.

#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"

using namespace llvm;

namespace {

// The callback's index by access size, or -1 for a size with no callback.
int size_index(uint64_t bytes) {
  switch (bytes) {
  case 1: return 0;
  case 2: return 1;
  case 4: return 2;
  case 8: return 3;
  case 16: return 4;
  default: return -1;
  }
}

struct Access {
  Instruction *inst;
  Value *address;
  bool store;
  int size;
  // Accesses of one run (one block, no call between) share each gate test.
  unsigned run;
};

// Whether `inst` may call code that takes or releases a lock the thread
// goes on holding (or holds no more). An intrinsic does not: those that
// become calls (memcpy, a 16-byte atomic in libatomic) leave the held
// locks as they found them, as a signal handler does.
bool may_call(const Instruction &inst) {
  return isa<CallBase>(inst) && !isa<IntrinsicInst>(inst);
}

// The accesses of `block` that need the shim's call, in order, each with
// its run (see `Access::run`). Left out:
// accesses to the function's own stack slots (allocas), this thread's own
// data, which the shim would drop anyway. Every other load and store is
// kept, also one the block made to the same address before, and loads of
// constant data (a lock that guards only such data is worth knowing of):
// the shim counts each access the program makes.
void accesses_of(BasicBlock &block, const DataLayout &layout, SmallVectorImpl<Access> &out,
                 unsigned &run) {
  run++;
  for (Instruction &inst : block) {
    if (may_call(inst)) {
      run++;
      continue;
    }
    Value *address;
    Type *type;
    if (auto *load = dyn_cast<LoadInst>(&inst)) {
      address = load->getPointerOperand();
      type = load->getType();
    } else if (auto *store = dyn_cast<StoreInst>(&inst)) {
      address = store->getPointerOperand();
      type = store->getValueOperand()->getType();
    } else {
      continue;
    }
    bool is_store = isa<StoreInst>(&inst);
    const Value *object = getUnderlyingObject(address);
    if (inst.hasMetadata(LLVMContext::MD_nosanitize) ||
        address->getType()->getPointerAddressSpace() != 0 || isa<AllocaInst>(object))
      continue;
    TypeSize bits = layout.getTypeStoreSizeInBits(type);
    if (bits.isScalable() || bits.getFixedValue() % 8 != 0)
      continue;
    int size = size_index(bits.getFixedValue() / 8);
    if (size < 0)
      continue;
    out.push_back({&inst, address, is_store, size, run});
  }
}

struct AccessGate : PassInfoMixin<AccessGate> {
  PreservedAnalyses run(Module &module, ModuleAnalysisManager &) {
    LLVMContext &context = module.getContext();
    const DataLayout &layout = module.getDataLayout();
    Type *word = Type::getInt64Ty(context);
    auto thread_word = [&](const char *name) {
      if (GlobalVariable *known = module.getNamedGlobal(name))
        return known;
      return new GlobalVariable(module, word, false, GlobalValue::ExternalLinkage, nullptr, name,
                                nullptr, GlobalValue::InitialExecTLSModel);
    };
    FunctionType *callback_type =
        FunctionType::get(Type::getVoidTy(context), {PointerType::get(context, 0)}, false);
    static const char *const sizes[] = {"1", "2", "4", "8", "16"};
    GlobalVariable *calls = nullptr;
    GlobalVariable *skip[2] = {nullptr, nullptr};
    FunctionCallee callbacks[2][5];
    MDNode *unlikely = MDBuilder(context).createUnlikelyBranchWeights();
    bool changed = false;

    for (Function &function : module) {
      if (function.isDeclaration() ||
          function.hasFnAttribute(Attribute::NoSanitizeCoverage) ||
          function.hasFnAttribute(Attribute::DisableSanitizerInstrumentation) ||
          function.getName().starts_with("__sanitizer_cov"))
        continue;
      SmallVector<Access, 64> accesses;
      unsigned runs = 0;
      for (BasicBlock &block : function)
        accesses_of(block, layout, accesses, runs);
      if (accesses.empty())
        continue;
      if (!calls) {
        calls = thread_word("__locksuit_gate_calls");
        skip[0] = thread_word("__locksuit_gate_skip_loads");
        skip[1] = thread_word("__locksuit_gate_skip_stores");
        for (int store = 0; store < 2; store++)
          for (int size = 0; size < 5; size++)
            callbacks[store][size] = module.getOrInsertFunction(
                std::string("__sanitizer_cov_") + (store ? "store" : "load") + sizes[size],
                callback_type);
      }
      // The gate's test, once per run and kind, and again after each call
      // the run makes to the shim (which may have shut either gate; the
      // later accesses then make no call). Within a run the set of locks
      // the thread holds does not change (that takes a call, which ends
      // the run), so nothing else can open or shut the gate for it.
      auto test = [&](IRBuilder<> &at, int store) -> Value * {
        Value *count = at.CreateLoad(word, at.CreateThreadLocalAddress(calls));
        if (store)
          count = at.CreateNot(count);
        Value *skipped = at.CreateLoad(word, at.CreateThreadLocalAddress(skip[store]));
        return at.CreateICmpNE(count, skipped);
      };
      unsigned tested_run[2] = {~0u, ~0u};
      Value *open[2] = {nullptr, nullptr};
      for (const Access &access : accesses) {
        if (tested_run[access.store] != access.run) {
          IRBuilder<> before(access.inst);
          open[access.store] = test(before, access.store);
          tested_run[access.store] = access.run;
        }
        BasicBlock *head = access.inst->getParent();
        Instruction *then = SplitBlockAndInsertIfThen(open[access.store], access.inst, false, unlikely);
        IRBuilder<> inside(then);
        inside.CreateCall(callbacks[access.store][access.size], {access.address});
        // Past the call: each kind this run tested, as the call left it.
        BasicBlock *tail = access.inst->getParent();
        for (int kind = 0; kind < 2; kind++) {
          if (tested_run[kind] != access.run)
            continue;
          Value *again = test(inside, kind);
          IRBuilder<> join(tail, tail->begin());
          PHINode *now = join.CreatePHI(Type::getInt1Ty(context), 2);
          now->addIncoming(open[kind], head);
          now->addIncoming(again, then->getParent());
          open[kind] = now;
        }
      }
      changed = true;
    }
    return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }

  // Also at -O0, and in functions marked optnone.
  static bool isRequired() { return true; }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "locksuit-access-gate", "1", [](PassBuilder &builder) {
            // Where sanitizer coverage runs: after the optimiser, so that
            // only the loads and stores the program really makes are seen.
            builder.registerOptimizerLastEPCallback(
                [](ModulePassManager &passes, OptimizationLevel) { passes.addPass(AccessGate()); });
          }};
}
