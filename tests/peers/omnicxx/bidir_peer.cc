// omniORB 4.2 C++ peer of bidirectional GIOP (idl/bidir.idl), the C++ twin
// of tests/peers/omni_bidir.py (same command line, same output).
//
//   bidir_peer serve [--host H] [--no-bidir]
//       Serves a BiDir::Registry (call_back(who, text) returns
//       who.notify(text)) from a POA with the BiDir policy BOTH, in an ORB
//       with -ORBacceptBiDirectionalGIOP 1 and "bidir" in its transport
//       rules (neither, and no policy, with --no-bidir).  Prints its IOR
//       and serves until stdin reaches end of file, SIGTERM or SIGINT.
//
//   bidir_peer call IOR TEXT [--host H] [--publish HOST:PORT] [--no-bidir]
//       Serves a BiDir::Listener (notify(text) answers "omniORB C++ heard "
//       + text) on H (default 127.0.0.1) from a POA with the BiDir policy, in
//       an ORB with -ORBofferBiDirectionalGIOP 1 (0 with --no-bidir), passes
//       it to the registry's call_back and prints one JSON line:
//       {"ok": true, "result": ...} or {"ok": false, "error": "TRANSIENT", ...}.
//       --publish puts HOST:PORT in the listener's IOR instead of the address
//       it listens on (an address the server cannot reach).

#include <omniORB4/CORBA.h>
#include <omniORB4/BiDirPolicy.h>  // after CORBA.h, which it needs

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>
#include <vector>

#include "bidir.hh"
#include "json_text.h"

namespace {

class ListenerImpl : public POA_BiDir::Listener {
 public:
  char* notify(const char* text) override {
    return CORBA::string_dup(("omniORB C++ heard " + std::string(text)).c_str());
  }
};

class RegistryImpl : public POA_BiDir::Registry {
 public:
  char* call_back(BiDir::Listener_ptr who, const char* text) override { return who->notify(text); }
  void subscribe(BiDir::Listener_ptr who) override { kept_ = BiDir::Listener::_duplicate(who); }
  char* call_kept(const char* text) override {
    if (CORBA::is_nil(kept_)) throw CORBA::BAD_INV_ORDER(0, CORBA::COMPLETED_NO);
    return kept_->notify(text);
  }

 private:
  BiDir::Listener_var kept_;
};

struct Options {
  std::string command, ior, text, host, publish;
  bool bidir = true;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "bidir_peer: %s\n", msg.c_str());
  std::fprintf(stderr,
               "usage: bidir_peer serve [--host H] [--no-bidir]\n"
               "       bidir_peer call IOR TEXT [--host H] [--publish HOST:PORT] [--no-bidir]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--host") o.host = value();
    else if (a == "--publish") o.publish = value();
    else if (a == "--no-bidir") o.bidir = false;
    else if (a.rfind("--", 0) == 0) usage_error("unknown option " + a);
    else positional.push_back(a);
  }
  if (positional.empty()) usage_error("a command (serve or call) is needed");
  o.command = positional[0];
  if (o.command == "serve") {
    if (positional.size() != 1) usage_error("serve takes no arguments");
    if (o.host.empty()) o.host = "0.0.0.0";
  } else if (o.command == "call") {
    if (positional.size() != 3) usage_error("call needs IOR and TEXT");
    o.ior = positional[1];
    o.text = positional[2];
    if (o.host.empty()) o.host = "127.0.0.1";
  } else {
    usage_error("unknown command " + o.command);
  }
  if (!o.publish.empty() && o.command != "call") usage_error("--publish is for call");
  return o;
}

// The ORB options of omni_bidir.py's orb_and_poa: `option` is
// offerBiDirectionalGIOP (client) or acceptBiDirectionalGIOP (server).
CORBA::ORB_ptr init_orb(const Options& o, const char* option) {
  std::vector<std::string> args = {"bidir_peer", std::string("-ORB") + option, o.bidir ? "1" : "0",
                                   "-ORBendPoint", "giop:tcp:" + o.host + ":",
                                   "-ORBnativeCharCodeSet", "UTF-8",
                                   "-ORBclientCallTimeOutPeriod", "20000"};
  if (o.bidir) {  // omniORB's transport rules must allow bidirectional connections too
    args.insert(args.end(), {"-ORBserverTransportRule", "* unix,ssl,tcp,bidir",
                             "-ORBclientTransportRule", "* unix,ssl,tcp,bidir"});
  }
  if (!o.publish.empty()) args.insert(args.end(), {"-ORBendPointPublish", "giop:tcp:" + o.publish});
  static std::vector<char*> argv;  // ORB_init keeps pointers into it
  for (auto& a : args) argv.push_back(strdup(a.c_str()));
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  return CORBA::ORB_init(argc, argv.data());
}

PortableServer::POA_ptr make_poa(CORBA::ORB_ptr orb, bool bidir) {
  CORBA::Object_var obj = orb->resolve_initial_references("RootPOA");
  PortableServer::POA_var root = PortableServer::POA::_narrow(obj);
  PortableServer::POAManager_var manager = root->the_POAManager();
  CORBA::PolicyList policies;
  if (bidir) {
    CORBA::Any both;
    both <<= BiDirPolicy::BOTH;
    policies.length(1);
    policies[0] = orb->create_policy(BiDirPolicy::BIDIRECTIONAL_POLICY_TYPE, both);
  }
  PortableServer::POA_ptr poa = root->create_POA("bidir", manager, policies);
  manager->activate();
  return poa;
}

// Until stdin reaches end of file (SIGTERM and SIGINT end the process as they do by default).
void wait_for_stop() {
  char buf[256];
  for (;;) {
    ssize_t n = read(0, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EINTR)) return;
  }
}

int serve(const Options& o) {
  CORBA::ORB_var orb = init_orb(o, "acceptBiDirectionalGIOP");
  PortableServer::POA_var poa = make_poa(orb, o.bidir);
  PortableServer::Servant_var<RegistryImpl> registry = new RegistryImpl;
  PortableServer::ObjectId_var id = poa->activate_object(registry);
  CORBA::Object_var ref = poa->id_to_reference(id);
  CORBA::String_var ior = orb->object_to_string(ref);
  std::printf("%s\n", static_cast<const char*>(ior));
  std::fflush(stdout);
  wait_for_stop();
  orb->destroy();
  return 0;
}

int call(const Options& o) {
  CORBA::ORB_var orb = init_orb(o, "offerBiDirectionalGIOP");
  int status = 1;
  try {
    PortableServer::POA_var poa = make_poa(orb, o.bidir);
    PortableServer::Servant_var<ListenerImpl> listener = new ListenerImpl;
    PortableServer::ObjectId_var id = poa->activate_object(listener);
    CORBA::Object_var listener_ref = poa->id_to_reference(id);
    BiDir::Listener_var who = BiDir::Listener::_narrow(listener_ref);
    CORBA::Object_var obj = orb->string_to_object(o.ior.c_str());
    BiDir::Registry_var registry = BiDir::Registry::_narrow(obj);
    if (CORBA::is_nil(registry)) {
      std::printf("{\"ok\": false, \"error\": \"not a BiDir::Registry\"}\n");
    } else {
      CORBA::String_var result = registry->call_back(who, o.text.c_str());
      std::printf("{\"ok\": true, \"result\": %s}\n", json_string(static_cast<const char*>(result)).c_str());
      status = 0;
    }
  } catch (const CORBA::SystemException& exc) {
    std::printf("{\"ok\": false, \"error\": %s, \"minor\": %lu, \"completed\": %d}\n",
                json_string(exc._name()).c_str(), static_cast<unsigned long>(exc.minor()),
                static_cast<int>(exc.completed()));
  } catch (const CORBA::Exception& exc) {
    std::printf("{\"ok\": false, \"error\": %s}\n", json_string(exc._name()).c_str());
  }
  std::fflush(stdout);
  orb->destroy();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  try {
    return o.command == "serve" ? serve(o) : call(o);
  } catch (const CORBA::Exception& exc) {
    std::fprintf(stderr, "bidir_peer: CORBA::%s\n", exc._name());
    return 1;
  }
}
