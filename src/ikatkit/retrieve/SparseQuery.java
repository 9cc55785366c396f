package ikatkit;

import org.apache.lucene.index.Term;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.BoostQuery;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.TermQuery;

/**
 * A SPLADE query for ikatkit's sparse searcher, the query Anserini's impact searcher builds
 * ({@code BagOfWordsQueryGenerator.buildQuery(field, weights)}: a disjunction of term queries, each boosted by its
 * weight), from the encoded vector in one string: one {@code term weight} a line. One string crosses from Python
 * instead of two objects a term.
 */
public final class SparseQuery {
  private SparseQuery() {}

  /** The query of {@code encoded} ("term weight" lines) over {@code field}; null when it has no term. */
  public static Query build(String field, String encoded) {
    BooleanQuery.Builder builder = new BooleanQuery.Builder();
    int terms = 0;
    for (String line : encoded.split("\n")) {
      int cut = line.lastIndexOf(' ');
      if (cut <= 0) {
        continue;
      }
      float weight = Float.parseFloat(line.substring(cut + 1));
      builder.add(new BoostQuery(new TermQuery(new Term(field, line.substring(0, cut))), weight),
          BooleanClause.Occur.SHOULD);
      terms++;
    }
    return terms == 0 ? null : builder.build();
  }
}
