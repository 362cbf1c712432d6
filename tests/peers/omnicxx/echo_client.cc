// omniORB 4.2 C++ client of Bench::Echo that can use SSL.
//
//   echo_client IOR [--ca FILE] [--key FILE] [--key-password PW]
//               [--calls N] [--threads T] [--seconds S] [--warmup S]
//               [--timeout S] [-ORB... value]
//
// Default mode: N (default 10) calls ping(i), each must return i; prints
//   {"calls": N, "ok": true|false, "detail": "..."} and exits 0 / 1.
// Benchmark mode (--seconds S): T closed-loop threads, warm-up then S
//   seconds; prints {"threads", "calls", "seconds", "calls_per_s", "errors"}.
// Arguments it does not know are passed to ORB_init (after its own
// defaults, so they win).  Bad options exit 2.  See README.md.

#include <omniORB4/CORBA.h>
#include <omniORB4/sslContext.h>

#include <openssl/ssl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench.hh"
#include "json_text.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string target;
  std::string ca, key, key_password;
  long calls = 10;
  long threads = 1;
  double seconds = -1;  // < 0: default (functional) mode
  double warmup = 1.0;
  double timeout = 5.0;
  std::vector<std::string> orb_args;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "echo_client: %s\n", msg.c_str());
  std::fprintf(stderr,
               "usage: echo_client IOR [--ca FILE] [--key FILE] "
               "[--key-password PW] [--calls N] [--threads T] [--seconds S] "
               "[--warmup S] [--timeout S] [ORB options]\n");
  std::exit(2);
}

long parse_long(const std::string& opt, const char* text, long min) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno || end == text || *end || v < min)
    usage_error(opt + " needs an integer >= " + std::to_string(min));
  return v;
}

double parse_double(const std::string& opt, const char* text, double min) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno || end == text || *end || !(v >= min) || !std::isfinite(v))
    usage_error(opt + " needs a number >= " + std::to_string(min));
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--ca") o.ca = value();
    else if (a == "--key") o.key = value();
    else if (a == "--key-password") o.key_password = value();
    else if (a == "--calls") o.calls = parse_long(a, value(), 1);
    else if (a == "--threads") o.threads = parse_long(a, value(), 1);
    else if (a == "--seconds") o.seconds = parse_double(a, value(), 1e-3);
    else if (a == "--warmup") o.warmup = parse_double(a, value(), 0);
    else if (a == "--timeout") o.timeout = parse_double(a, value(), 1e-3);
    else if (a == "-h" || a == "--help") usage_error("help requested");
    else if (a.rfind("--", 0) == 0) usage_error("unknown option " + a);
    else if (a.rfind("-ORB", 0) == 0) {
      // omniORB options take exactly one value.
      o.orb_args.push_back(a);
      o.orb_args.push_back(value());
    } else if (o.target.empty() && a[0] != '-') o.target = a;
    else o.orb_args.push_back(a);
  }
  if (o.target.empty()) usage_error("no IOR given");
  return o;
}

const char* completion_name(CORBA::CompletionStatus s) {
  switch (s) {
    case CORBA::COMPLETED_YES: return "YES";
    case CORBA::COMPLETED_NO: return "NO";
    default: return "MAYBE";
  }
}

std::string describe(const CORBA::SystemException& e) {
  char buf[64];
  std::snprintf(buf, sizeof buf, " minor 0x%08lx",
                static_cast<unsigned long>(e.minor()));
  std::string s = std::string(e._name()) + buf;
  const char* minor = e.NP_minorString();
  if (minor) s += std::string(" (") + minor + ")";
  return s + ", completed " + completion_name(e.completed());
}

void finish(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}

// Functional mode: N pings, each checked.
int run_calls(Bench::Echo_ptr echo, long n) {
  std::string detail;
  bool ok = true;
  long done = 0;
  for (long i = 0; i < n; ++i) {
    try {
      CORBA::ULongLong r = echo->ping(static_cast<CORBA::ULongLong>(i));
      if (r != static_cast<CORBA::ULongLong>(i)) {
        ok = false;
        detail = "call " + std::to_string(i) + ": ping returned " +
                 std::to_string(r);
        break;
      }
      ++done;
    } catch (CORBA::SystemException& e) {
      ok = false;
      detail = "call " + std::to_string(i) + ": " + describe(e);
      break;
    } catch (CORBA::Exception& e) {
      ok = false;
      detail = "call " + std::to_string(i) + ": " + e._name();
      break;
    }
  }
  if (ok) detail = std::to_string(done) + " pings returned their argument";
  std::printf("{\"calls\": %ld, \"ok\": %s, \"detail\": %s}\n", n,
              ok ? "true" : "false", json_string(detail).c_str());
  return ok ? 0 : 1;
}

// Benchmark mode: T closed-loop threads; count calls that complete inside
// [start, end).
int run_bench(Bench::Echo_ptr echo, const Options& o) {
  auto now = Clock::now();
  auto start = now + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(o.warmup));
  auto end = start + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(o.seconds));
  std::atomic<long> calls{0}, errors{0};
  std::vector<std::thread> threads;
  for (long t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, echo] {
      long my_calls = 0, my_errors = 0;
      for (;;) {
        CORBA::ULongLong stamp = static_cast<CORBA::ULongLong>(
            Clock::now().time_since_epoch().count());
        bool good;
        try {
          good = echo->ping(stamp) == stamp;
        } catch (CORBA::Exception&) {
          good = false;
        }
        auto done = Clock::now();
        if (done >= end) break;
        if (done >= start) {
          if (good) ++my_calls;
          else ++my_errors;
        }
      }
      calls += my_calls;
      errors += my_errors;
    });
  }
  for (auto& t : threads) t.join();
  long c = calls.load();
  double rate = std::round(c / o.seconds * 10.0) / 10.0;
  std::printf(
      "{\"threads\": %ld, \"calls\": %ld, \"seconds\": %g, "
      "\"calls_per_s\": %.1f, \"errors\": %ld}\n",
      o.threads, c, o.seconds, rate, errors.load());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);

  // sslContext statics must be set before ORB_init.  Without a CA file
  // omniORB 4.2 disables its SSL transport (SSL-only IORs then give
  // TRANSIENT).  The key file (cert + key) is optional for a client.
  if (!o.ca.empty()) sslContext::certificate_authority_file = o.ca.c_str();
  if (!o.key.empty()) {
    sslContext::key_file = o.key.c_str();
    // omniORB 4.2 loads the private key only if a password is set.
    sslContext::key_file_password = o.key_password.c_str();
  }
  // Verify the server's certificate against the CA (no host name check:
  // omniORB 4.2 does none).  FAIL_IF_NO_PEER_CERT only matters to servers.
  sslContext::verify_mode = SSL_VERIFY_PEER;

  long conns = o.threads;
  std::vector<std::string> args = {
      argv[0],
      "-ORBmaxGIOPConnectionPerServer", std::to_string(conns),
      "-ORBoneCallPerConnection", "0",
      "-ORBclientCallTimeOutPeriod",
      std::to_string(static_cast<long>(o.timeout * 1000))};
  // Transport rules accumulate and the first match wins, so the default is
  // added only when the caller gives none (e.g. "* tcp" to force plain TCP).
  bool own_rule = false;
  for (auto& a : o.orb_args)
    if (a == "-ORBclientTransportRule") own_rule = true;
  if (!own_rule) {
    args.push_back("-ORBclientTransportRule");
    args.push_back("* ssl,tcp");
  }
  args.insert(args.end(), o.orb_args.begin(), o.orb_args.end());
  std::vector<char*> cargs;
  for (auto& s : args) cargs.push_back(const_cast<char*>(s.c_str()));
  int cargc = static_cast<int>(cargs.size());
  cargs.push_back(nullptr);

  CORBA::ORB_var orb;
  Bench::Echo_var echo;
  try {
    orb = CORBA::ORB_init(cargc, cargs.data());
    CORBA::Object_var obj = orb->string_to_object(o.target.c_str());
    echo = Bench::Echo::_unchecked_narrow(obj);
    if (CORBA::is_nil(echo)) throw CORBA::INV_OBJREF(0, CORBA::COMPLETED_NO);
  } catch (CORBA::SystemException& e) {
    std::string d = "setup: " + describe(e);
    if (o.seconds < 0)
      std::printf("{\"calls\": %ld, \"ok\": false, \"detail\": %s}\n",
                  o.calls, json_string(d).c_str());
    else
      std::fprintf(stderr, "echo_client: %s\n", d.c_str());
    finish(1);
  } catch (CORBA::Exception& e) {
    std::fprintf(stderr, "echo_client: setup: CORBA::%s\n", e._name());
    finish(1);
  } catch (omniORB::fatalException& e) {
    std::fprintf(stderr, "echo_client: omniORB fatal error %s:%d: %s\n",
                 e.file(), e.line(), e.errmsg());
    finish(1);
  }

  int code = o.seconds < 0 ? run_calls(echo, o.calls) : run_bench(echo, o);
  std::fflush(stdout);
  try {
    echo = Bench::Echo::_nil();
    orb->destroy();
  } catch (...) {
  }
  finish(code);
}
