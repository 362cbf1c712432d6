// A JacORB peer of bidirectional GIOP (idl/bidir.idl) through the Dynamic
// Skeleton and Dynamic Invocation interfaces, with the command line of
// tests/peers/omni_bidir.py:
//
//   java -cp LIB/*:. JacBidir serve [--host H] [--no-bidir]
//       serves a BiDir::Registry (call_back(who, text) returns who.notify(text))
//       from a POA with the BiDir policy BOTH, in an ORB with JacORB's
//       BiDirConnectionInitializer (neither with --no-bidir); prints its IOR
//       and serves until stdin reaches end of file.
//   java -cp LIB/*:. JacBidir call IOR TEXT [--host H] [--publish H:P] [--no-bidir]
//       serves a BiDir::Listener (notify(text) answers "JacORB heard " + text)
//       on H (default 127.0.0.1) from a POA with the policy, passes it to the
//       registry's call_back and prints one JSON line: {"ok": true, "result": ...}
//       or {"ok": false, "error": "TRANSIENT", ...}.  --publish names another
//       address in the listener's IOR (JacORB's ior_proxy_host and _port);
//       JacORB still offers the address it listens on.
//
// tests/interop/test_bidir_jacorb.py runs "call" against a pyorb server and
// a pyorb client against "serve", which calls the client's listener over the
// connection the client opened.
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.util.Collections;
import java.util.Properties;

import org.omg.BiDirPolicy.BIDIRECTIONAL_POLICY_TYPE;
import org.omg.BiDirPolicy.BOTH;
import org.omg.BiDirPolicy.BidirectionalPolicyValueHelper;
import org.omg.CORBA.ARG_IN;
import org.omg.CORBA.Any;
import org.omg.CORBA.BAD_OPERATION;
import org.omg.CORBA.NVList;
import org.omg.CORBA.ORB;
import org.omg.CORBA.Policy;
import org.omg.CORBA.Request;
import org.omg.CORBA.ServerRequest;
import org.omg.CORBA.SystemException;
import org.omg.CORBA.TCKind;
import org.omg.PortableServer.DynamicImplementation;
import org.omg.PortableServer.POA;
import org.omg.PortableServer.POAHelper;

public final class JacBidir {
    private JacBidir() {
    }

    /** Serves BiDir::Registry's call_back: calls who.notify(text) and returns its answer. */
    static final class Registry extends DynamicImplementation {
        private final ORB orb;

        Registry(ORB orb) {
            this.orb = orb;
        }

        @Override
        public String[] _all_interfaces(POA poa, byte[] oid) {
            return new String[] {"IDL:BiDir/Registry:1.0"};
        }

        @Override
        public void invoke(ServerRequest request) {
            if (!request.operation().equals("call_back")) {
                throw new BAD_OPERATION(request.operation());
            }
            NVList args = orb.create_list(2);
            Any who = orb.create_any();
            who.type(orb.get_primitive_tc(TCKind.tk_objref));
            args.add_value("who", who, ARG_IN.value);
            Any text = orb.create_any();
            text.type(orb.get_primitive_tc(TCKind.tk_string));
            args.add_value("text", text, ARG_IN.value);
            request.arguments(args);
            Request notify = who.extract_Object()._request("notify");
            notify.add_in_arg().insert_string(text.extract_string());
            notify.set_return_type(orb.get_primitive_tc(TCKind.tk_string));
            notify.invoke();  // a system exception of the callback goes back to the caller
            Exception failed = notify.env().exception();
            if (failed instanceof SystemException) {
                throw (SystemException) failed;
            }
            Any result = orb.create_any();
            result.insert_string(notify.return_value().extract_string());
            request.set_result(result);
        }
    }

    /** Serves BiDir::Listener's notify. */
    static final class Listener extends DynamicImplementation {
        private final ORB orb;

        Listener(ORB orb) {
            this.orb = orb;
        }

        @Override
        public String[] _all_interfaces(POA poa, byte[] oid) {
            return new String[] {"IDL:BiDir/Listener:1.0"};
        }

        @Override
        public void invoke(ServerRequest request) {
            if (!request.operation().equals("notify")) {
                throw new BAD_OPERATION(request.operation());
            }
            NVList args = orb.create_list(1);
            Any text = orb.create_any();
            text.type(orb.get_primitive_tc(TCKind.tk_string));
            args.add_value("text", text, ARG_IN.value);
            request.arguments(args);
            Any result = orb.create_any();
            result.insert_string("JacORB heard " + text.extract_string());
            request.set_result(result);
        }
    }

    static String option(String[] args, String name, String otherwise) {
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equals(name)) {
                return args[i + 1];
            }
        }
        return otherwise;
    }

    /** This host's first non-loopback IPv4 address: what a server on a wildcard publishes. */
    static String hostAddress() throws Exception {
        for (NetworkInterface nic : Collections.list(NetworkInterface.getNetworkInterfaces())) {
            for (InetAddress address : Collections.list(nic.getInetAddresses())) {
                if (address instanceof Inet4Address && !address.isLoopbackAddress()) {
                    return address.getHostAddress();
                }
            }
        }
        return "127.0.0.1";
    }

    static ORB init(boolean bidir, String host, String publish) throws Exception {
        Properties props = new Properties();
        props.setProperty("org.omg.CORBA.ORBClass", "org.jacorb.orb.ORB");
        props.setProperty("org.omg.CORBA.ORBSingletonClass", "org.jacorb.orb.ORBSingleton");
        props.setProperty("jacorb.connection.client.pending_reply_timeout", "60000");
        props.setProperty("OAIAddr", host.equals("0.0.0.0") ? hostAddress() : host);
        if (publish != null) {
            int colon = publish.lastIndexOf(':');
            props.setProperty("jacorb.ior_proxy_host", publish.substring(0, colon));
            props.setProperty("jacorb.ior_proxy_port", publish.substring(colon + 1));
        }
        if (bidir) {
            props.setProperty("org.omg.PortableInterceptor.ORBInitializerClass.bidir_init",
                              "org.jacorb.orb.giop.BiDirConnectionInitializer");
        }
        return ORB.init(new String[0], props);
    }

    /** A POA under the root, with the BiDir policy BOTH if ``bidir``. */
    static POA poa(ORB orb, boolean bidir) throws Exception {
        POA root = POAHelper.narrow(orb.resolve_initial_references("RootPOA"));
        Policy[] policies = new Policy[0];
        if (bidir) {
            Any both = orb.create_any();
            BidirectionalPolicyValueHelper.insert(both, BOTH.value);
            policies = new Policy[] {orb.create_policy(BIDIRECTIONAL_POLICY_TYPE.value, both)};
        }
        POA poa = root.create_POA("bidir", root.the_POAManager(), policies);
        root.the_POAManager().activate();
        return poa;
    }

    static void serve(String[] args, boolean bidir) throws Exception {
        ORB orb = init(bidir, option(args, "--host", "0.0.0.0"), null);
        POA poa = poa(orb, bidir);
        JacPeer.serve(orb, poa.id_to_reference(poa.activate_object(new Registry(orb))));
    }

    static int call(String[] args, boolean bidir) throws Exception {
        ORB orb = init(bidir, option(args, "--host", "127.0.0.1"), option(args, "--publish", null));
        POA poa = poa(orb, bidir);
        Thread serving = new Thread(orb::run);
        serving.setDaemon(true);
        serving.start();
        try {
            org.omg.CORBA.Object listener = poa.id_to_reference(poa.activate_object(new Listener(orb)));
            Request request = orb.string_to_object(args[1])._request("call_back");
            request.add_in_arg().insert_Object(listener);
            request.add_in_arg().insert_string(args[2]);
            request.set_return_type(orb.get_primitive_tc(TCKind.tk_string));
            try {
                request.invoke();
                Exception failed = request.env().exception();
                if (failed instanceof SystemException) {
                    throw (SystemException) failed;
                }
            } catch (SystemException exc) {
                System.out.println("{\"ok\": false, \"error\": \"" + exc.getClass().getSimpleName()
                                   + "\", \"minor\": " + exc.minor + ", \"completed\": " + exc.completed.value()
                                   + ", \"detail\": \"" + JacPeer.escape(String.valueOf(exc.getMessage())) + "\"}");
                System.out.flush();
                return 1;
            }
            String result = request.return_value().extract_string();
            System.out.println("{\"ok\": true, \"result\": \"" + JacPeer.escape(result) + "\"}");
            System.out.flush();
            return 0;
        } finally {
            orb.shutdown(false);
        }
    }

    public static void main(String[] args) throws Exception {
        boolean bidir = true;
        for (String arg : args) {
            bidir &= !arg.equals("--no-bidir");
        }
        if (args.length > 0 && args[0].equals("serve")) {
            serve(args, bidir);
            System.exit(0);
        }
        System.exit(args.length >= 3 && args[0].equals("call") ? call(args, bidir) : 2);
    }
}
