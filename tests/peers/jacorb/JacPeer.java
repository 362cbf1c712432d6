// What the JacORB peers share: the ORB's start, serving one servant until
// stdin closes, and the JSON result lines of the clients (one per case, as
// tests/peers/omni_client.py prints).
import java.util.Properties;

import org.omg.CORBA.ORB;
import org.omg.PortableServer.POA;
import org.omg.PortableServer.POAHelper;
import org.omg.PortableServer.Servant;

final class JacPeer {
    private JacPeer() {
    }

    /** JacORB speaking GIOP 1.``minor``; a server listens on 127.0.0.1 only. */
    static ORB init(String minor, boolean server) {
        Properties props = new Properties();
        props.setProperty("org.omg.CORBA.ORBClass", "org.jacorb.orb.ORB");
        props.setProperty("org.omg.CORBA.ORBSingletonClass", "org.jacorb.orb.ORBSingleton");
        props.setProperty("jacorb.giop_minor_version", minor);
        if (server) {
            props.setProperty("OAIAddr", "127.0.0.1");
        } else {
            props.setProperty("jacorb.connection.client.pending_reply_timeout", "10000");
        }
        return ORB.init(new String[0], props);
    }

    /** Activates ``servant`` on the root POA, prints its IOR, and serves until stdin closes. */
    static void serve(ORB orb, Servant servant) throws Exception {
        POA root = POAHelper.narrow(orb.resolve_initial_references("RootPOA"));
        root.the_POAManager().activate();
        serve(orb, root.servant_to_reference(servant));
    }

    /** Prints ``ref``'s IOR, and serves until stdin closes. */
    static void serve(ORB orb, org.omg.CORBA.Object ref) throws Exception {
        System.out.println(orb.object_to_string(ref));
        System.out.flush();
        Thread serving = new Thread(orb::run);
        serving.setDaemon(true);
        serving.start();
        while (System.in.read() >= 0) {
            // serve until the test closes stdin
        }
        orb.shutdown(false);
    }

    static void report(String name, boolean ok, String detail) {
        System.out.println("{\"case\": \"" + name + "\", \"ok\": " + ok + ", \"detail\": \"" + escape(detail) + "\"}");
        System.out.flush();
    }

    static String escape(String text) {
        StringBuilder out = new StringBuilder();
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }
}
