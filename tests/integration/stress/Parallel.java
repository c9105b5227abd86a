// Parallel.java — Java's HttpClient posting N bodies of SIZE bytes at
// once to URL (HTTP/1.1: one connection each), as test_parallel.c runs it
// under the shim. Body k is the bytes (i * (k + 1)) % 251, so each request
// is told apart at the server by its sha256. Prints ok=N and errors=N.
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;

public class Parallel {
    public static void main(String[] args) throws Exception {
        URI uri = URI.create(args[0]);
        int n = Integer.parseInt(args[1]);
        int size = Integer.parseInt(args[2]);
        HttpClient client = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .executor(Executors.newFixedThreadPool(n))
            .build();
        List<CompletableFuture<HttpResponse<String>>> all = new ArrayList<>();
        for (int k = 0; k < n; k++) {
            byte[] body = new byte[size];
            for (int i = 0; i < size; i++)
                body[i] = (byte) ((i * (k + 1)) % 251);
            HttpRequest req = HttpRequest.newBuilder(uri)
                .POST(HttpRequest.BodyPublishers.ofByteArray(body))
                .build();
            all.add(client.sendAsync(req, HttpResponse.BodyHandlers.ofString()));
        }
        int ok = 0, errors = 0;
        for (CompletableFuture<HttpResponse<String>> f : all) {
            try {
                if (f.get().statusCode() == 200)
                    ok++;
                else
                    errors++;
            } catch (Exception e) {
                errors++;
                System.err.println("request failed: " + e);
            }
        }
        System.out.println("ok=" + ok);
        System.out.println("errors=" + errors);
        System.exit(0);
    }
}
