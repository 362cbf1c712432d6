// A JacORB client of Interop::Types through the Dynamic Invocation Interface
// (no IDL compiler needed): calls the text and wide-text echoes of
// idl/interop.idl and prints one JSON line per case, as tests/peers/omni_client.py.
//
//   java -cp LIB/*:. JacClient TARGET GIOP_MINOR

import org.omg.CORBA.Any;
import org.omg.CORBA.ORB;
import org.omg.CORBA.Request;
import org.omg.CORBA.TCKind;

public final class JacClient {
    private static ORB orb;
    private static org.omg.CORBA.Object target;

    public static void main(String[] args) {
        orb = JacPeer.init(args[1], false);
        target = orb.string_to_object(args[0]);
        echo("echo_string", TCKind.tk_string, "ascii");
        echo("echo_string_latin1", TCKind.tk_string, "p\u00e9");
        echo("echo_string_unicode", TCKind.tk_string, "\u20ac \u4e2d");
        echo("echo_wstring", TCKind.tk_wstring, "wide");
        echo("echo_wstring_latin1", TCKind.tk_wstring, "w\u00e9");
        echo("echo_wstring_unicode", TCKind.tk_wstring, "\u20ac \u4e2d \ud83d\ude00");
        echo("echo_wstring_empty", TCKind.tk_wstring, "");
        echo("echo_wchar", TCKind.tk_wchar, "\u20ac");
        echo("echo_char", TCKind.tk_char, "c");
        orb.shutdown(false);
    }

    private static void echo(String name, TCKind kind, String value) {
        String operation = name.replaceAll("_(latin1|unicode|empty)$", "");
        try {
            Request request = target._request(operation);
            Any arg = request.add_in_arg();
            switch (kind.value()) {
                case TCKind._tk_string: arg.insert_string(value); break;
                case TCKind._tk_wstring: arg.insert_wstring(value); break;
                case TCKind._tk_wchar: arg.insert_wchar(value.charAt(0)); break;
                default: arg.insert_char(value.charAt(0)); break;
            }
            request.set_return_type(orb.get_primitive_tc(kind));
            request.invoke();
            if (request.env().exception() != null) {
                report(name, false, request.env().exception().toString());
                return;
            }
            Any result = request.return_value();
            String got;
            switch (kind.value()) {
                case TCKind._tk_string: got = result.extract_string(); break;
                case TCKind._tk_wstring: got = result.extract_wstring(); break;
                case TCKind._tk_wchar: got = String.valueOf(result.extract_wchar()); break;
                default: got = String.valueOf(result.extract_char()); break;
            }
            report(name, got.equals(value),
                   got.equals(value) ? "echoed" : "sent " + JacPeer.escape(value) + ", got " + JacPeer.escape(got));
        } catch (RuntimeException exc) {
            report(name, false, exc.toString());
        }
    }

    private static void report(String name, boolean ok, String detail) {
        JacPeer.report(name, ok, detail);
    }
}
