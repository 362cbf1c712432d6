// omniORB 4.2 C++ server of Bench::Echo, with an optional SSL endpoint.
//
//   echo_server [--host H] [--port P] [--ssl-port P] [--no-tcp]
//               [--ca FILE] [--key FILE] [--key-password PW]
//               [--require-client-cert] [--no-stdin-watch] [-ORB... value]
//
// Prints exactly one line on stdout, the IOR of the Echo object, then serves
// until stdin reaches EOF (unless --no-stdin-watch), SIGTERM or SIGINT, and
// exits 0.  Errors go to stderr with a non-zero exit status.  Arguments it
// does not know are passed to ORB_init unchanged.  See README.md.

#include <omniORB4/CORBA.h>
#include <omniORB4/sslContext.h>

#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench.hh"

namespace {

class EchoImpl : public POA_Bench::Echo {
 public:
  CORBA::ULongLong ping(CORBA::ULongLong stamp) override { return stamp; }
  void notify(CORBA::ULongLong) override {}
};

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  int ssl_port = -1;  // -1: no SSL endpoint
  bool tcp = true;
  std::string ca, key, key_password;
  bool require_client_cert = false;
  bool stdin_watch = true;
  std::vector<std::string> orb_args;  // passed through to ORB_init
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "echo_server: %s\n", msg.c_str());
  std::fprintf(stderr,
               "usage: echo_server [--host H] [--port P] [--ssl-port P] "
               "[--no-tcp] [--ca FILE] [--key FILE] [--key-password PW] "
               "[--require-client-cert] [--no-stdin-watch] [ORB options]\n");
  std::exit(2);
}

int parse_port(const std::string& opt, const char* text) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno || end == text || *end || v < 0 || v > 65535)
    usage_error(opt + " needs a port number 0..65535, not '" + text + "'");
  return static_cast<int>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--host") o.host = value();
    else if (a == "--port") o.port = parse_port(a, value());
    else if (a == "--ssl-port") o.ssl_port = parse_port(a, value());
    else if (a == "--no-tcp") o.tcp = false;
    else if (a == "--ca") o.ca = value();
    else if (a == "--key") o.key = value();
    else if (a == "--key-password") o.key_password = value();
    else if (a == "--require-client-cert") o.require_client_cert = true;
    else if (a == "--no-stdin-watch") o.stdin_watch = false;
    else if (a == "-h" || a == "--help") usage_error("help requested");
    else if (a.rfind("--", 0) == 0) usage_error("unknown option " + a);
    else o.orb_args.push_back(a);
  }
  if (!o.tcp && o.ssl_port < 0)
    usage_error("--no-tcp needs --ssl-port (no endpoint left)");
  if (o.ssl_port >= 0 && (o.ca.empty() || o.key.empty()))
    usage_error("--ssl-port needs --ca and --key");
  if (o.require_client_cert && o.ssl_port < 0)
    usage_error("--require-client-cert needs --ssl-port");
  return o;
}

std::string endpoint(const char* scheme, const std::string& host, int port) {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return std::string("giop:") + scheme + ":" + h + ":" + std::to_string(port);
}

CORBA::ORB_var g_orb;
std::once_flag g_shutdown_once;

void request_shutdown() {
  std::call_once(g_shutdown_once, [] {
    try {
      g_orb->shutdown(0);
    } catch (...) {
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);

  // Block SIGTERM/SIGINT in every thread (the ORB's threads inherit the
  // mask); one thread takes them with sigwait and shuts the ORB down.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  // The sslContext statics must be set before ORB_init.  Setting the CA
  // file is what enables omniORB's SSL transport at all.
  if (!o.ca.empty()) sslContext::certificate_authority_file = o.ca.c_str();
  if (!o.key.empty()) {
    sslContext::key_file = o.key.c_str();
    // omniORB 4.2 loads the private key only when a password is set
    // (set_privatekey returns early otherwise); "" works for a plain key.
    sslContext::key_file_password = o.key_password.c_str();
  }
  sslContext::verify_mode =
      o.require_client_cert ? (SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT)
                            : SSL_VERIFY_PEER;

  std::vector<std::string> args = {argv[0]};
  if (o.tcp) {
    args.push_back("-ORBendPoint");
    args.push_back(endpoint("tcp", o.host, o.port));
  }
  if (o.ssl_port >= 0) {
    args.push_back("-ORBendPoint");
    args.push_back(endpoint("ssl", o.host, o.ssl_port));
  }
  args.insert(args.end(), o.orb_args.begin(), o.orb_args.end());
  std::vector<char*> cargs;
  for (auto& s : args) cargs.push_back(const_cast<char*>(s.c_str()));
  int cargc = static_cast<int>(cargs.size());
  cargs.push_back(nullptr);

  try {
    g_orb = CORBA::ORB_init(cargc, cargs.data());
    CORBA::Object_var obj = g_orb->resolve_initial_references("RootPOA");
    PortableServer::POA_var poa = PortableServer::POA::_narrow(obj);
    EchoImpl* servant = new EchoImpl;
    PortableServer::ObjectId_var oid = poa->activate_object(servant);
    servant->_remove_ref();
    CORBA::Object_var ref = poa->id_to_reference(oid);
    PortableServer::POAManager_var mgr = poa->the_POAManager();
    mgr->activate();

    CORBA::String_var ior = g_orb->object_to_string(ref);
    std::printf("%s\n", static_cast<const char*>(ior));
    std::fflush(stdout);

    std::thread([sigs]() mutable {
      int sig = 0;
      while (sigwait(&sigs, &sig) != 0) {
      }
      request_shutdown();
    }).detach();

    if (o.stdin_watch) {
      std::thread([] {
        char buf[256];
        for (;;) {
          ssize_t n = read(0, buf, sizeof buf);
          if (n > 0) continue;
          if (n < 0 && errno == EINTR) continue;
          break;  // EOF or a read error: the parent is gone
        }
        request_shutdown();
      }).detach();
    }

    g_orb->run();
    g_orb->destroy();
  } catch (CORBA::SystemException& e) {
    const char* minor = e.NP_minorString();
    std::fprintf(stderr, "echo_server: CORBA::%s minor 0x%08lx%s%s%s\n",
                 e._name(), static_cast<unsigned long>(e.minor()),
                 minor ? " (" : "", minor ? minor : "", minor ? ")" : "");
    std::fflush(stderr);
    _exit(1);
  } catch (CORBA::Exception& e) {
    std::fprintf(stderr, "echo_server: CORBA::%s\n", e._name());
    std::fflush(stderr);
    _exit(1);
  } catch (omniORB::fatalException& e) {
    std::fprintf(stderr, "echo_server: omniORB fatal error %s:%d: %s\n",
                 e.file(), e.line(), e.errmsg());
    std::fflush(stderr);
    _exit(1);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  // The stdin/signal threads may still be blocked; leave without running
  // static destructors under them.
  _exit(0);
}
