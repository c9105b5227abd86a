/* The conformance matrix's Java carrier (test_matrix.c): TLS built into
 * the program (the JDK's own), HTTP/1.1 over one keep-alive connection.
 * Usage: java MatrixClient URL...; prints done=1 when every URL was
 * answered (any status). The test's server has a throwaway certificate:
 * nothing is verified. */
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.cert.X509Certificate;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.X509TrustManager;

public class MatrixClient {
    public static void main(String[] args) throws Exception {
        TrustManager[] any = {new X509TrustManager() {
            public void checkClientTrusted(X509Certificate[] c, String a) {}
            public void checkServerTrusted(X509Certificate[] c, String a) {}
            public X509Certificate[] getAcceptedIssuers() {
                return new X509Certificate[0];
            }
        }};
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(null, any, null);
        HttpClient c = HttpClient.newBuilder().sslContext(ctx)
                           .version(HttpClient.Version.HTTP_1_1).build();
        for (String u : args)
            c.send(HttpRequest.newBuilder(URI.create(u)).build(),
                   HttpResponse.BodyHandlers.discarding());
        System.out.println("done=1");
    }
}
